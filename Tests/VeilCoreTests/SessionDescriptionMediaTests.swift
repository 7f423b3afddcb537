import VeilCore
import XCTest

/// `SessionDescriptionMedia`: strict SDP, so that no spelling of a video section gets past the
/// privacy rule that a lenient parser elsewhere would read as one.
final class SessionDescriptionMediaTests: XCTestCase {
    static let header = "v=0\r\no=- 1 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"
    static let audio = "m=audio 9 UDP/TLS/RTP/SAVPF 96\r\nc=IN IP4 0.0.0.0\r\na=rtpmap:96 OPUS/48000/2\r\n"
    static let data = "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=sctp-port:5000\r\n"

    /// Descriptions that carry a video section as some parser reads them, each spelled so that a
    /// check for the text "m=video" at the start of a line misses it (and the plain spelling).
    static let videoSpellings: [String] = {
        let video = "video 9 UDP/TLS/RTP/SAVPF 97"
        let lines = ["m=\(video)", " m=\(video)", "\tm=\(video)", "M=\(video)", "m= \(video)", "m =\(video)", "m=\(video.uppercased())",
                     "m=Video 9 UDP/TLS/RTP/SAVPF 97", "m=video  9 UDP/TLS/RTP/SAVPF 97", "m=video\t9 UDP/TLS/RTP/SAVPF 97"]
        var all = lines.map { header + audio + data + $0 + "\r\n" }
        all += lines.map { (header + $0 + "\r\n" + audio).replacingOccurrences(of: "\r\n", with: "\n") }
        // Line ends some parsers split on and RFC 8866 does not have.
        for separator in ["\r", "\u{2028}", "\u{2029}", "\u{85}", "\u{0B}", "\u{0C}", "\0"] {
            all.append(header + audio + "a=x" + separator + "m=\(video)\r\n" + data)
        }
        all.append(header + audio + "a=x\r\r\nm=\(video)\r\n")
        return all
    }()

    func testVoiceAndDataSectionsAreReadInOrder() throws {
        let media = try SessionDescriptionMedia(parsing: Self.header + Self.audio + Self.data)
        XCTAssertEqual(media.kinds, ["audio", "application"])
        XCTAssertEqual(media.sections.map(\.line), [5, 8])
        XCTAssertTrue(media.sections[1].isDataChannel)
        XCTAssertNil(media.firstForbiddenSection)
        XCTAssertEqual(try SessionDescriptionMedia(parsing: (Self.header + Self.audio).replacingOccurrences(of: "\r\n", with: "\n")).kinds, ["audio"])
        XCTAssertEqual(try SessionDescriptionMedia(parsing: Self.header + "a=tool:x\tq\r\n").kinds, [], "a tab in a value is allowed")
    }

    func testEverySpellingOfAVideoSectionIsRefusedOrReadAsForbidden() {
        for sdp in Self.videoSpellings {
            if let media = try? SessionDescriptionMedia(parsing: sdp) {
                XCTAssertNotNil(media.firstForbiddenSection, "read as \(media.kinds): \(sdp.debugDescription)")
            }
        }
        // A leading blank, an upper-case type letter or a blank around "=" is not SDP at all.
        for line in [" m=video 9 RTP/AVP 96", "M=video 9 RTP/AVP 96", "m= video 9 RTP/AVP 96", "m =video 9 RTP/AVP 96"] {
            XCTAssertThrowsError(try SessionDescriptionMedia(parsing: Self.header + line + "\r\n"), line)
        }
    }

    func testOtherMediaSecondSectionsAndNonSCTPApplicationsAreForbidden() throws {
        for sdp in [Self.header + Self.audio + "m=image 9 udptl t38\r\n", Self.header + Self.audio + Self.audio,
                    Self.header + Self.data + Self.data, Self.header + "m=application 9 RTP/AVP 100\r\n", Self.header + "m=text 9 RTP/AVP 98\r\n"] {
            XCTAssertNotNil(try SessionDescriptionMedia(parsing: sdp).firstForbiddenSection, sdp)
        }
    }

    func testMalformedLinesNameTheirLine() {
        XCTAssertThrowsError(try SessionDescriptionMedia(parsing: Self.header + "hello\r\n")) { error in
            XCTAssertEqual((error as? SessionDescriptionMedia.Malformed)?.line, 5)
        }
        XCTAssertThrowsError(try SessionDescriptionMedia(parsing: Self.header + "m=audio\r\n"))
        XCTAssertThrowsError(try SessionDescriptionMedia(parsing: Self.header + "\r\n" + Self.audio), "an empty line inside")
    }
}
