@testable import VeilCall
import XCTest

/// The privacy rule on session descriptions, on its own.
final class SessionDescriptionPolicyTests: XCTestCase {
    private let header = "v=0\r\no=- 1 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"
    private let audio = "m=audio 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:96 OPUS/48000/2\r\n"
    private let data = "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=sctp-port:5000\r\n"

    func testAudioAndTheDataChannelPass() throws {
        XCTAssertNoThrow(try SessionDescriptionPolicy.validate(header + audio + data, requireBoth: true))
        XCTAssertEqual(SessionDescriptionPolicy.mediaKinds(in: header + audio + data), ["audio", "application"])
        XCTAssertNoThrow(try SessionDescriptionPolicy.validate(header + audio), "a browser may offer audio only")
        XCTAssertNoThrow(try SessionDescriptionPolicy.validate(header.replacingOccurrences(of: "\r\n", with: "\n") + audio.replacingOccurrences(of: "\r\n", with: "\n")), "bare LF line ends")
    }

    func testVideoIsRefusedWhereverItAppears() {
        let video = "m=video 9 UDP/TLS/RTP/SAVPF 97\r\na=rtpmap:97 VP8/90000\r\n"
        for sdp in [header + audio + data + video, header + video + audio + data, header + audio + "m=video 0 UDP/TLS/RTP/SAVPF 0\r\n" + data,
                    (header + audio + data + video).replacingOccurrences(of: "\r\n", with: "\n")] {
            XCTAssertThrowsError(try SessionDescriptionPolicy.validate(sdp)) { error in
                XCTAssertEqual((error as? PeerError)?.code, .privacyViolation)
            }
        }
    }

    func testOtherMediaAndDuplicatesAreRefused() {
        for sdp in [header + audio + "m=image 9 udptl t38\r\n", header + audio + audio + data, header + audio + data + data,
                    header + audio + "m=application 9 RTP/AVP 100\r\n", header + audio + "m=text 9 RTP/AVP 98\r\n"] {
            XCTAssertThrowsError(try SessionDescriptionPolicy.validate(sdp)) { error in
                XCTAssertEqual((error as? PeerError)?.code, .privacyViolation, sdp)
            }
        }
    }

    func testVeilsOwnDescriptionsNeedBothSections() {
        XCTAssertThrowsError(try SessionDescriptionPolicy.validate(header + audio, requireBoth: true))
        XCTAssertThrowsError(try SessionDescriptionPolicy.validate(header + data, requireBoth: true))
    }

    func testOversizedDescriptionsAreRefusedUnread() {
        let huge = header + audio + String(repeating: "a=x\r\n", count: 20_000)
        XCTAssertThrowsError(try SessionDescriptionPolicy.validate(huge)) { error in
            XCTAssertEqual((error as? PeerError)?.code, .invalidDescription)
        }
    }
}
