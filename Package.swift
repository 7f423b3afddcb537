// swift-tools-version:5.10
import PackageDescription

// libLiteRt.so comes from the PyPI wheel ai-edge-litert (see scripts/bootstrap), unpacked into the
// checkout's cache. The rpath points there so `veil` runs from .build without LD_LIBRARY_PATH.
let liteRtDir = Context.packageDirectory + "/.cache/veil/lib"

let package = Package(
    name: "Veil",
    products: [
        .library(name: "VeilCore", targets: ["VeilCore"]),
        .library(name: "VeilVision", targets: ["VeilVision"]),
        .library(name: "VeilRender", targets: ["VeilRender"]),
        .library(name: "VeilTracking", targets: ["VeilTracking"]),
        .library(name: "VeilMedia", targets: ["VeilMedia"]),
        .library(name: "VeilInterop", targets: ["VeilInterop"]),
        .library(name: "VeilInteropNetwork", targets: ["VeilInteropNetwork"]),
        .library(name: "VeilExpressionSource", targets: ["VeilExpressionSource"]),
        .library(name: "VeilCameraSource", targets: ["VeilCameraSource"]),
        .executable(name: "veil", targets: ["veil"]),
        .executable(name: "veil-privacy", targets: ["veil-privacy"]),
    ],
    targets: [
        // C libraries: Debian packages found through pkg-config, and LiteRT behind Veil's own header.
        .systemLibrary(name: "CGStreamer",
                       pkgConfig: "gstreamer-1.0 gstreamer-app-1.0 gstreamer-video-1.0 gstreamer-audio-1.0 gstreamer-sdp-1.0 gstreamer-webrtc-1.0 gstreamer-rtp-1.0",
                       providers: [.apt(["libgstreamer1.0-dev", "libgstreamer-plugins-base1.0-dev", "libgstreamer-plugins-bad1.0-dev"])]),
        .systemLibrary(name: "CSoup", pkgConfig: "libsoup-3.0", providers: [.apt(["libsoup-3.0-dev"])]),
        // libcrypto (OpenSSL, which GStreamer's DTLS elements use): each call's own DTLS certificate,
        // and the room server's TLS certificate and key read and matched before it listens.
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // GLib, GObject and GIO without GStreamer: the room server's event loop, sockets and TLS
        // (VeilServerTests reads the graph: the server links no media code).
        .systemLibrary(name: "CGLib", pkgConfig: "glib-2.0 gobject-2.0 gio-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // C shims for what Swift cannot call: GObject's variadic g_object_get/set (GLib alone), and
        // webrtcbin's action signals through the variadic g_signal_emit_by_name (GStreamer).
        .target(name: "CVeilGLib", dependencies: ["CGLib"]),
        .target(name: "CVeilWebRTC", dependencies: ["CGStreamer"]),
        // hiredis, the Redis client through which several `veil serve` nodes share rooms; its GLib
        // adapter (static functions in a header) compiled once in a shim of its own.
        .systemLibrary(name: "CHiredis", pkgConfig: "hiredis", providers: [.apt(["libhiredis-dev"])]),
        .target(name: "CVeilRedis", dependencies: ["CHiredis", "CGLib"]),
        .systemLibrary(name: "CCairo", pkgConfig: "cairo", providers: [.apt(["libcairo2-dev"])]),
        // Xlib: the window `veil call --out window` draws in, which Veil keeps on top in its compact mode.
        .systemLibrary(name: "CX11", pkgConfig: "x11", providers: [.apt(["libx11-dev"])]),
        .systemLibrary(name: "CLiteRt"),

        // Pure Swift, Foundation only: what a call carries and needs, and nothing that sees a face:
        // Expression, the wire codec, the privacy filter, jitter buffer, signaling, tokens, SDP.
        .target(name: "VeilCore"),
        // Pure Swift: the avatar ecosystem's wire formats (OSC 1.0 and the VMC protocol, Live Link
        // Face), encoded and decoded without I/O; links nothing beyond VeilCore.
        .target(name: "VeilInterop", dependencies: ["VeilCore"]),
        // The seam every expression source plugs into (`ExpressionSource`: a camera and its tracker,
        // a VMC or Live Link Face sender, later Apple's ARKit or Vision), and the thread a source
        // delivers from. Links nothing beyond VeilCore (CallLayerSurfaceTests reads the graph): a new
        // source is a target beside the others that depends on this one.
        .target(name: "VeilExpressionSource", dependencies: ["VeilCore"]),
        // UDP sockets over Glibc (every system call in System.swift): IPv4 and IPv6, getaddrinfo,
        // sends that never block. No C type in its API.
        .target(name: "VeilDatagram"),
        // The avatar protocols over UDP: Veil's expression frames sent to VMC Marionettes and to
        // Unreal's Live Link (`veil track --send`, `veil call --send`), and a face received from a
        // VMC Performer or the Live Link Face app (`veil call --face`). No LiteRT, no GStreamer.
        .target(name: "VeilInteropNetwork", dependencies: ["VeilInterop", "VeilDatagram", "VeilCore", "VeilExpressionSource"]),
        // Pure Swift: pictures and faces. Images, landmarks, face geometry, head pose and the
        // expression estimator. The call layer (VeilCall) must not depend on it, even indirectly
        // (CallLayerSurfaceTests reads the package graph).
        .target(name: "VeilVision", dependencies: ["VeilCore"]),
        // Drawing model: canvas protocol, avatar styles, backgrounds, picture-in-picture.
        .target(name: "VeilRender", dependencies: ["VeilCore", "VeilVision"]),
        // Cairo backend of the canvas.
        .target(name: "VeilCairo", dependencies: ["VeilRender", "VeilCore", "VeilVision", "CCairo"]),
        // Face tracking: MediaPipe's face models on the LiteRT runtime.
        .target(name: "VeilTracking", dependencies: ["VeilCore", "VeilVision", "VeilConsole", "CLiteRt"],
                linkerSettings: [.unsafeFlags(["-L\(liteRtDir)", "-Xlinker", "-rpath", "-Xlinker", liteRtDir])]),
        // GStreamer sources and sinks: files, images, image sequences, v4l2; MP4/WebM/PNG out.
        .target(name: "VeilMedia", dependencies: ["VeilCore", "VeilVision", "CGStreamer", "CX11"]),
        // The capture loop (read a camera or file, pace, track at the chosen privacy level) that
        // `veil call`, `veil track` and `veil render` share, and the camera as an expression source
        // on it (`veil call --camera/--video`: a file played in real time, looped).
        .target(name: "VeilCameraSource", dependencies: ["VeilExpressionSource", "VeilTracking", "VeilMedia", "VeilVision", "VeilConsole", "VeilCore"]),
        // GLib main loop on its own thread, GObject signal bridging, GError → Swift errors.
        .target(name: "VeilGLib", dependencies: ["CGLib"]),
        // The room server: HTTP + WebSocket signaling (libsoup), rooms, tokens.
        // TLS through GLib's backend (glib-networking); libcrypto checks the key matches the certificate.
        // Several nodes share rooms through Redis (hiredis, on the server's GLib loop).
        .target(name: "VeilServer", dependencies: ["VeilCore", "VeilGLib", "CSoup", "CGLib", "COpenSSL", "CHiredis", "CVeilRedis"]),
        // Calls: WebRTC peers on webrtcbin (Opus + expression data channel), sessions, statistics.
        .target(name: "VeilCall", dependencies: ["VeilCore", "VeilGLib", "CSoup", "CGStreamer", "CVeilGLib", "CVeilWebRTC", "COpenSSL"]),
        // Talking-face clips with ground truth: piecewise-affine warping of a real photo.
        .target(name: "VeilSynth", dependencies: ["VeilCore", "VeilVision", "VeilTracking"]),
        // The re-identification experiment's recorder (`make privacy`): measuring equipment, not Veil.
        .executableTarget(name: "veil-privacy", dependencies: ["VeilCore", "VeilVision", "VeilTracking", "VeilMedia", "VeilSynth"],
                          path: "Sources/veil-privacy"),
        // What Veil's command-line tools share: messages and progress on stderr, the open-file limit,
        // the monotonic clock the trackers and benchmarks time with.
        .target(name: "VeilConsole"),
        // `veil bench`'s measuring equipment: tracking, drawing, bandwidth, a real call, the room
        // server under load and the peers beside Veil; the report, its JSON and its chart.
        .target(name: "VeilBench",
                dependencies: ["VeilCore", "VeilVision", "VeilRender", "VeilCairo", "VeilTracking", "VeilMedia", "VeilSynth",
                               "VeilServer", "VeilCall", "VeilConsole", "VeilInterop", "VeilDatagram", "VeilInteropNetwork"]),
        .executableTarget(name: "veil",
                          dependencies: ["VeilCore", "VeilVision", "VeilRender", "VeilCairo", "VeilTracking", "VeilMedia", "VeilSynth", "VeilServer", "VeilCall",
                                         "VeilConsole", "VeilBench", "VeilInterop", "VeilInteropNetwork",
                                         "VeilExpressionSource", "VeilCameraSource"]),

        .testTarget(name: "VeilGLibTests", dependencies: ["VeilGLib", "CGLib"]),
        .testTarget(name: "VeilServerTests", dependencies: ["VeilServer", "VeilCore", "VeilGLib", "CSoup", "CGLib", "VeilTestSupport"]),
        .testTarget(name: "VeilCallTests", dependencies: ["VeilCall", "VeilCore", "VeilGLib", "VeilMedia", "VeilServer", "VeilBench", "VeilTestSupport"]),
        .testTarget(name: "VeilCoreTests", dependencies: ["VeilCore", "VeilVision"]),
        .testTarget(name: "VeilRenderTests", dependencies: ["VeilRender", "VeilCairo", "VeilCore", "VeilVision"]),
        .testTarget(name: "VeilTrackingTests", dependencies: ["VeilTracking", "VeilCore", "VeilVision", "VeilMedia", "VeilSynth", "VeilRender", "VeilCairo"]),
        .testTarget(name: "VeilSynthTests", dependencies: ["VeilSynth", "VeilCore", "VeilVision", "VeilMedia", "VeilTracking"]),
        .testTarget(name: "VeilMediaTests", dependencies: ["VeilMedia", "VeilCore", "VeilVision"]),
        .testTarget(name: "VeilBenchTests", dependencies: ["VeilBench", "VeilCore", "VeilVision", "VeilInterop", "VeilConsole"]),
        // python/: the independent OSC implementation (python-osc) the tests check Veil against.
        // What several test targets share: a certificate authority made with openssl, python-osc's peer, test expressions,
        // the package graph as SwiftPM reads it.
        .target(name: "VeilTestSupport", dependencies: ["VeilCore"], path: "Tests/VeilTestSupport"),
        .testTarget(name: "VeilInteropTests", dependencies: ["VeilInterop", "VeilCore", "VeilTestSupport"], exclude: ["python"]),
        .testTarget(name: "VeilDatagramTests", dependencies: ["VeilDatagram"]),
        .testTarget(name: "VeilExpressionSourceTests", dependencies: ["VeilExpressionSource", "VeilCore"]),
        .testTarget(name: "VeilCameraSourceTests", dependencies: ["VeilCameraSource", "VeilExpressionSource", "VeilMedia", "VeilVision", "VeilCore"]),
        .testTarget(name: "VeilInteropNetworkTests", dependencies: ["VeilInteropNetwork", "VeilInterop", "VeilDatagram", "VeilCore", "VeilTestSupport"]),
        .testTarget(name: "VeilCLITests", dependencies: ["VeilCore", "VeilVision", "VeilMedia", "VeilCall", "VeilInterop", "VeilDatagram", "VeilTestSupport", "veil", "veil-privacy"]),
        // The browser client in Debian's chromium, driven over WebDriver, in calls with `veil call`.
        .testTarget(name: "VeilWebTests", dependencies: ["VeilServer", "VeilCall", "VeilCore", "VeilVision", "VeilRender", "VeilCairo", "VeilTestSupport", "veil"]),
    ],
    swiftLanguageVersions: [.v5]
)
