import Foundation
import XCTest
@testable import VeilCore

/// Where the server secret comes from, how its file is made and guarded, and that it never shows.
final class TokenSecretTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-secret-\(UUID().uuidString)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func mode(_ url: URL) throws -> Int {
        try XCTUnwrap(FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? NSNumber).intValue
    }

    func testTextFormats() throws {
        let bytes = Array(0..<32) as [UInt8]
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(try ServerSecret(text: hex).bytes, bytes)
        XCTAssertEqual(try ServerSecret(text: "  \(hex.uppercased())\n").bytes, bytes)
        XCTAssertEqual(try ServerSecret(text: Data(bytes).base64EncodedString()).bytes, bytes)
        let url = Data(bytes + [0xfb, 0xff]).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        XCTAssertEqual(try ServerSecret(text: url).bytes, bytes + [0xfb, 0xff])
        XCTAssertThrowsError(try ServerSecret(text: String(hex.prefix(62)))) { XCTAssertTrue("\($0)".contains("at least 32")) }
        XCTAssertThrowsError(try ServerSecret(text: "not a secret!"))
        XCTAssertThrowsError(try ServerSecret(bytes: []))
    }

    func testTheSecretNeverShows() throws {
        let secret = try ServerSecret(bytes: Array(repeating: 0xAB, count: 32))
        XCTAssertEqual("\(secret)", "ServerSecret(32 bytes)")
        var dumped = ""
        dump(secret, to: &dumped)
        XCTAssertFalse(dumped.lowercased().contains("171"), dumped) // 0xAB
        XCTAssertFalse(String(reflecting: secret).lowercased().contains("abab"))
        XCTAssertNotEqual(ServerSecret.random().bytes, ServerSecret.random().bytes)
    }

    func testFirstLoadCreatesAPrivateFileAndLaterLoadsReadIt() throws {
        let file = directory.appendingPathComponent("nested/secret")
        let (created, source) = try ServerSecret.load(environment: [:], file: file, createIfMissing: true)
        XCTAssertEqual(source, .file(file, created: true))
        XCTAssertEqual(try mode(file) & 0o777, 0o600)
        XCTAssertEqual(try mode(file.deletingLastPathComponent()) & 0o777, 0o700)
        XCTAssertEqual(created.bytes.count, 32)
        let text = try String(contentsOf: file, encoding: .utf8)
        XCTAssertEqual(text, created.hexText + "\n")
        let (again, source2) = try ServerSecret.load(environment: [:], file: file, createIfMissing: true)
        XCTAssertEqual(source2, .file(file, created: false))
        XCTAssertEqual(again.bytes, created.bytes)
        XCTAssertThrowsError(try ServerSecret.create(at: file), "never overwrites")
    }

    func testAFileOthersCanReadIsRefused() throws {
        let file = directory.appendingPathComponent("secret")
        _ = try ServerSecret.create(at: file)
        for loose in [0o644, 0o640, 0o604, 0o660] {
            try FileManager.default.setAttributes([.posixPermissions: loose], ofItemAtPath: file.path)
            XCTAssertThrowsError(try ServerSecret.read(from: file)) { error in
                XCTAssertTrue("\(error)".contains("chmod 600"), "\(error)")
            }
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o400], ofItemAtPath: file.path)
        XCTAssertNoThrow(try ServerSecret.read(from: file))
    }

    func testAMissingFileIsAClearErrorWhenNotCreating() {
        let file = directory.appendingPathComponent("absent")
        XCTAssertThrowsError(try ServerSecret.load(environment: [:], file: file, createIfMissing: false)) { error in
            XCTAssertTrue("\(error)".contains("veil serve"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: file.path))
    }

    func testTheEnvironmentTakesPrecedence() throws {
        let hex = String(repeating: "42", count: 32)
        let file = directory.appendingPathComponent("secret")
        let (secret, source) = try ServerSecret.load(environment: ["VEIL_SECRET": hex], file: file, createIfMissing: true)
        XCTAssertEqual(source, .environment)
        XCTAssertEqual(secret.bytes, [UInt8](repeating: 0x42, count: 32))
        XCTAssertFalse(FileManager.default.fileExists(atPath: file.path))
        XCTAssertThrowsError(try ServerSecret.load(environment: ["VEIL_SECRET": "short"], file: file, createIfMissing: true)) {
            XCTAssertTrue("\($0)".contains("VEIL_SECRET"))
        }
    }

    func testDefaultFileLocation() {
        XCTAssertEqual(ServerSecret.defaultFile(environment: ["HOME": "/home/ana"]).path, "/home/ana/.config/veil/secret")
        XCTAssertEqual(ServerSecret.defaultFile(environment: ["HOME": "/home/ana", "XDG_CONFIG_HOME": "/cfg"]).path, "/cfg/veil/secret")
    }
}
