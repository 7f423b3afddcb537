import Foundation
import VeilCall
import VeilCore
import VeilServer
import VeilTestSupport
import XCTest

/// The browser client over HTTPS: `RoomServer` with a certificate made by the test (openssl),
/// Debian's headless chromium told to trust that certificate's key
/// (`--ignore-certificate-errors-spki-list`) and to find the server under a host name that is
/// not loopback (`--host-resolver-rules`), so that the page is a secure context only because it
/// came over TLS. The page joins over wss:// and calls a native session that verifies the same
/// certificate (`ServerTrust`).
final class SecureBrowserCallTests: XCTestCase {
    private var work: URL!
    private var server: RoomServer?
    private var driver: WebDriver?
    private var session: CallSession?

    /// The name chromium resolves to 127.0.0.1: not a loopback name, so nothing but HTTPS makes
    /// the page a secure context.
    static let hostName = "veil.test"

    override func setUpWithError() throws {
        driver = try WebDriver()
        work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-web-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let session {
            let done = DispatchSemaphore(value: 0)
            Task.detached { await session.leave(); done.signal() }
            _ = done.wait(timeout: .now() + 5)
        }
        driver?.stop()
        server?.stop()
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    func testThePageOverHTTPSIsASecureContextAndJoinsACall() throws {
        let issued = try TestCertificateAuthority.selfSigned(in: work, commonName: Self.hostName,
                                                             subjectAltName: "DNS:\(Self.hostName),DNS:localhost,IP:127.0.0.1")
        let certificateFile = issued.certificate, keyFile = issued.key
        let secret = ServerSecret.random()
        let tokens = TokenAuthority(secret: secret)
        let certificate = try ServerCertificate(certificateFile: certificateFile, keyFile: keyFile)
        let server = RoomServer(configuration: .init(secret: secret, host: "127.0.0.1", port: 0,
                                                     webRoot: BrowserCallTests.webDirectory, tls: certificate))
        self.server = server
        let url = try server.start()
        XCTAssertEqual(url.scheme, "wss")
        XCTAssertEqual(server.pageURL?.scheme, "https")
        let port = try XCTUnwrap(server.port)

        // Carol, native, verifies the server's certificate against the certificate itself.
        var configuration = CallSession.Configuration(server: url, room: "r1", user: "carol",
                                                      token: try tokens.issue(room: "r1", user: "carol", lifetime: 600),
                                                      audioInput: .testTone(frequency: 440), statisticsInterval: 1)
        configuration.serverTrust = try ServerTrust(certificateAuthorities: certificateFile)
        let carol = CallSession(configuration: configuration)
        session = carol
        let carolLog = EventRecorder(carol)
        carol.start()
        XCTAssertTrue(waitUntil(15) { carolLog.joined }, "carol did not join over wss: \(carolLog.events)")
        let sender = Task.detached {
            var sequence: UInt32 = 0
            while !Task.isCancelled {
                carol.send(ExpressionFrame(sequence: sequence, captureTimeMicros: carol.mediaTimeMicros, state: .tracked, expression: .neutral))
                sequence &+= 1
                try? await Task.sleep(nanoseconds: 33_000_000)
            }
        }
        defer { sender.cancel() }

        let pin = try TestCertificateAuthority.publicKeyPin(of: keyFile)
        let browser = try XCTUnwrap(driver).session(extraArguments: ["--ignore-certificate-errors-spki-list=\(pin)",
                                                                     "--host-resolver-rules=MAP \(Self.hostName) 127.0.0.1"])
        defer { browser.delete() }
        var fragment = URLComponents()
        fragment.queryItems = [.init(name: "room", value: "r1"), .init(name: "user", value: "web"),
                               .init(name: "token", value: try tokens.issue(room: "r1", user: "web", lifetime: 600))]
        try browser.navigate(try XCTUnwrap(URL(string: "https://\(Self.hostName):\(port)/#\(fragment.percentEncodedQuery ?? "")")))
        XCTAssertTrue(try browser.wait(for: "window.veil && window.veil.ready", timeout: 15), "the page did not start: \(browser.consoleLog())")

        // Served over TLS, so a secure context: the browser offers the microphone.
        XCTAssertEqual(try browser.execute("return location.protocol") as? String, "https:")
        XCTAssertEqual(try browser.execute("return window.isSecureContext") as? Bool, true)
        XCTAssertEqual(try browser.execute("return typeof navigator.mediaDevices?.getUserMedia") as? String, "function")

        try browser.execute("document.getElementById('join').click()")
        XCTAssertTrue(try browser.wait(for: "window.veil.status === 'joined'", timeout: 15), browser.pageState())
        // The microphone was asked for and given: no complaint about HTTPS or a missing microphone.
        XCTAssertTrue(try browser.wait(for: "(window.veil.userMediaRequests || []).length > 0", timeout: 10), browser.pageState())
        let message = try browser.execute("return String(window.veil.message || '')") as? String ?? ""
        XCTAssertFalse(message.contains("HTTPS") || message.contains("microphone"), message)

        // A call: carol receives the page's voice-driven frames and its voice; the page decodes carol's frames.
        XCTAssertTrue(waitUntil(20) { carolLog.frames(from: "web").count > 30 }, "carol got \(carolLog.frames(from: "web").count) frames from the page")
        XCTAssertTrue(try browser.wait(for: "(window.veil.remotes.carol?.framesDecoded ?? 0) > 30", timeout: 15), browser.pageState())
        XCTAssertTrue(waitUntil(10) { (carolLog.latestStatistics?.peers["web"]?.audioBitrateIn ?? 0) > 8000 },
                      "carol should receive the page's Opus voice: \(String(describing: carolLog.latestStatistics?.peers["web"]))")
    }
}
