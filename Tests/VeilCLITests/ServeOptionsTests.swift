import VeilCore
import XCTest
@testable import veil

/// `veil serve --ice-server`: what clients are handed in `joined`.
final class ServeOptionsTests: XCTestCase {
    func testICEServerEntries() throws {
        XCTAssertEqual(try iceServer("stun:stun.example.org:3478"), ICEServer(urls: ["stun:stun.example.org:3478"]))
        XCTAssertEqual(try iceServer("turn:turn.example.org:3478?transport=udp"), ICEServer(urls: ["turn:turn.example.org:3478?transport=udp"]))
        // Credentials move into the entry's own fields; a password may hold ':' and '@'.
        XCTAssertEqual(try iceServer("turn:veil:pa:ss@w@10.0.0.1:3478"),
                       ICEServer(urls: ["turn:10.0.0.1:3478"], username: "veil", credential: "pa:ss@w"))
        XCTAssertEqual(try iceServer("turns://u:p@relay.example:5349"), ICEServer(urls: ["turns:relay.example:5349"], username: "u", credential: "p"))
        for bad in ["http://example.org", "stun:u:p@host:1", "turn:nopassword@host:1", "turn:u:p@", "relay.example:3478"] {
            XCTAssertThrowsError(try iceServer(bad), bad)
        }
    }
}
