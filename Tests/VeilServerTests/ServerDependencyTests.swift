import Foundation
import VeilTestSupport
import XCTest

/// The room server is the one part of Veil that runs on a server: it needs GLib's loop, sockets and
/// TLS, libsoup and libcrypto, and no media code. The package graph gives it no path to GStreamer,
/// the call layer or anything that holds a picture, so none of that can be linked into a server
/// built from these targets.
final class ServerDependencyTests: XCTestCase {
    static let media: Set<String> = ["CGStreamer", "CVeilWebRTC", "VeilMedia", "VeilCall", "VeilVision", "VeilTracking", "CLiteRt", "CCairo", "CX11"]

    func testTheRoomServerReachesNoMediaCode() throws {
        let graph = try PackageGraph.read()
        let server = graph.closure(of: "VeilServer")
        print("VeilServer depends on \(server.sorted())")
        XCTAssertTrue(server.contains("CGLib"), "the graph was not read: VeilServer's GLib is missing")
        XCTAssertTrue(server.isDisjoint(with: Self.media), "VeilServer can reach \(server.intersection(Self.media).sorted())")
        let glib = graph.closure(of: "VeilGLib")
        XCTAssertTrue(glib.isDisjoint(with: Self.media), "VeilGLib can reach \(glib.intersection(Self.media).sorted())")
        // The GObject shim is GLib's alone; webrtcbin's signals live in a shim of their own.
        XCTAssertFalse(graph.closure(of: "CVeilGLib").contains("CGStreamer"))
        XCTAssertTrue(graph.closure(of: "CVeilWebRTC").contains("CGStreamer"))
    }

    /// The headers tell the same story as the graph: nothing the server's C modules include is GStreamer's.
    func testTheServersCHeadersIncludeNoGStreamer() throws {
        for header in ["Sources/CGLib/shim.h", "Sources/CVeilGLib/include/CVeilGLib.h", "Sources/CSoup/shim.h"] {
            let text = try String(contentsOf: PackageGraph.root.appendingPathComponent(header), encoding: .utf8)
            XCTAssertFalse(text.contains("<gst/"), "\(header) includes a GStreamer header")
        }
    }

    /// The reading finds an indirect path.
    func testAnIndirectPathIsFound() {
        let graph = PackageGraph(["VeilServer": ["VeilGLib"], "VeilGLib": ["CVeilGLib"], "CVeilGLib": ["CGStreamer"], "CGStreamer": []])
        XCTAssertTrue(graph.closure(of: "VeilServer").contains("CGStreamer"))
        XCTAssertEqual(graph.dependents(of: "CGStreamer"), ["CGStreamer", "CVeilGLib", "VeilGLib", "VeilServer"])
    }
}
