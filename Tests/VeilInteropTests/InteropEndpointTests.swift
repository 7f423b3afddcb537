import VeilInterop
import XCTest

/// `vmc://` and `livelink://` URLs as users type them, and every way of getting one wrong.
final class InteropEndpointTests: XCTestCase {
    func testParsesHostsPortsAndDefaults() throws {
        let cases: [(String, InteropEndpoint.Kind, String, UInt16)] = [
            ("vmc://127.0.0.1:39540", .vmc, "127.0.0.1", 39540),
            ("vmc://studio.local", .vmc, "studio.local", 39539),
            ("VMC://Studio.local/", .vmc, "Studio.local", 39539),
            ("livelink://10.0.0.7", .liveLink, "10.0.0.7", 11111),
            ("livelink://localhost:12000", .liveLink, "localhost", 12000),
            ("livelink://[::1]:11112", .liveLink, "::1", 11112),
        ]
        for (text, kind, host, port) in cases {
            let endpoint = try InteropEndpoint(parsing: text)
            XCTAssertEqual(endpoint, InteropEndpoint(kind: kind, host: host, port: port), text)
        }
        XCTAssertEqual(try InteropEndpoint(parsing: "livelink://[::1]").description, "livelink://[::1]:11111")
        XCTAssertEqual(try InteropEndpoint(parsing: "vmc://h").description, "vmc://h:39539")
        // Listening (`--face`, later) may leave the host out.
        XCTAssertEqual(try InteropEndpoint(parsing: "livelink://:11111", hostRequired: false).host, "")
    }

    func testRefusesWhatIsNotAnEndpointAndSaysWhy() {
        let cases: [(String, InteropURLError, String)] = [
            ("osc://127.0.0.1:9000", .unsupportedScheme, "not osc://"),
            ("http://example.com", .unsupportedScheme, "vmc:// and livelink://"),
            ("127.0.0.1:39539", .malformed, "not a URL"),
            ("vmc://", .missingHost, "names no host"),
            ("vmc://:39539", .missingHost, "vmc://127.0.0.1:39539"),
            ("vmc://host:0", .invalidPort, "from 1 to 65535"),
            ("vmc://host:65536", .invalidPort, "not '65536'"),
            ("livelink://host:port", .invalidPort, "Live Link Face's default is 11111"),
            ("vmc://host:", .invalidPort, "not ''"),
            ("vmc://host:1/path", .malformed, "only a host and a port"),
            ("vmc://user@host", .malformed, "only a host and a port"),
            ("vmc://::1:39539", .malformed, "brackets"),
            ("vmc://[::1", .malformed, "closing ]"),
            ("vmc://[::1]x", .malformed, "after ]"),
        ]
        for (text, kind, words) in cases {
            XCTAssertThrowsError(try InteropEndpoint(parsing: text), text) { error in
                XCTAssertEqual(error as? InteropURLError, kind, "\(text): \(error)")
                XCTAssertTrue("\(error)".contains(words), "\(text): '\(error)' does not say '\(words)'")
            }
        }
    }
}
