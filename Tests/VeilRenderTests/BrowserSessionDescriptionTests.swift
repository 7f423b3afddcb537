import Foundation
import VeilCore
import XCTest

/// web/sdp.js in headless chromium against VeilCore's `SessionDescriptionMedia`: the browser page
/// refuses exactly the remote descriptions `veil call` and the room server refuse.
final class BrowserSessionDescriptionTests: XCTestCase {
    func testTheBrowserRefusesWhatVeilRefuses() throws {
        let chromium = try HeadlessChromium.require()
        let header = "v=0\r\no=- 1 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n"
        let audio = "m=audio 9 UDP/TLS/RTP/SAVPF 96\r\na=rtpmap:96 OPUS/48000/2\r\n"
        let data = "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\na=sctp-port:5000\r\n"
        var cases = [header + audio + data, header + audio, (header + audio + data).replacingOccurrences(of: "\r\n", with: "\n"),
                     header + data + audio, header + "a=tool:x\ty\r\n" + audio,
                     header + audio + audio, header + data + data, header + "m=application 9 RTP/AVP 100\r\n", header + "m=image 9 udptl t38\r\n",
                     header + "hello\r\n" + audio, header + "\r\n" + audio, header + "m=audio\r\n"]
        for line in ["m=video", " m=video", "\tm=video", "M=video", "m= video", "m =video", "m=VIDEO", "m=Video", "a=x\rm=video",
                     "a=x\u{2028}m=video", "a=x\u{2029}m=video", "a=x\u{85}m=video", "a=x\u{0B}m=video", "a=x\u{0}m=video", "a=x\r\rm=video"] {
            cases.append(header + audio + "\(line) 9 UDP/TLS/RTP/SAVPF 97\r\n" + data)
        }
        let expected = cases.map { sdp -> Bool in
            guard let media = try? SessionDescriptionMedia(parsing: sdp) else { return false }
            return media.firstForbiddenSection == nil
        }
        XCTAssertEqual(expected.filter { $0 }.count, 5, "the first five are voice and data only")

        let input = try JSONSerialization.data(withJSONObject: cases)
        let page = HeadlessChromium.page(imports: ["{ sessionDescriptionRefusal } from 'sdp.js'"], input: input,
                                         body: "return input.map((sdp) => sessionDescriptionRefusal(sdp) === null);")
        let accepted = try XCTUnwrap(try chromium.run(page) as? [Bool])
        XCTAssertEqual(accepted.count, cases.count)
        for (index, (browser, swift)) in zip(accepted, expected).enumerated() where browser != swift {
            XCTFail("case \(index) \(cases[index].debugDescription): the browser \(browser ? "accepts" : "refuses") it, Swift \(swift ? "accepts" : "refuses")")
        }
    }
}
