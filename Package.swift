// swift-tools-version:5.10
import PackageDescription

// libLiteRt.so comes from the PyPI wheel ai-edge-litert (see scripts/bootstrap), unpacked into the
// checkout's cache. The rpath points there so `veil` runs from .build without LD_LIBRARY_PATH.
let liteRtDir = Context.packageDirectory + "/.cache/veil/lib"

let package = Package(
    name: "Veil",
    products: [
        .library(name: "VeilCore", targets: ["VeilCore"]),
        .library(name: "VeilRender", targets: ["VeilRender"]),
        .library(name: "VeilTracking", targets: ["VeilTracking"]),
        .library(name: "VeilMedia", targets: ["VeilMedia"]),
        .executable(name: "veil", targets: ["veil"]),
    ],
    targets: [
        // C libraries: Debian packages found through pkg-config, and LiteRT behind Veil's own header.
        .systemLibrary(name: "CGStreamer", pkgConfig: "gstreamer-1.0 gstreamer-app-1.0 gstreamer-video-1.0",
                       providers: [.apt(["libgstreamer1.0-dev", "libgstreamer-plugins-base1.0-dev"])]),
        .systemLibrary(name: "CCairo", pkgConfig: "cairo", providers: [.apt(["libcairo2-dev"])]),
        .systemLibrary(name: "CLiteRt"),

        // Pure Swift, Foundation only: landmarks, Expression, wire codec, estimator, filters, rig.
        .target(name: "VeilCore"),
        // Drawing model: canvas protocol, avatar styles, backgrounds, picture-in-picture.
        .target(name: "VeilRender", dependencies: ["VeilCore"]),
        // Cairo backend of the canvas.
        .target(name: "VeilCairo", dependencies: ["VeilRender", "VeilCore", "CCairo"]),
        // Face tracking: MediaPipe's face models on the LiteRT runtime.
        .target(name: "VeilTracking", dependencies: ["VeilCore", "CLiteRt"],
                linkerSettings: [.unsafeFlags(["-L\(liteRtDir)", "-Xlinker", "-rpath", "-Xlinker", liteRtDir])]),
        // GStreamer sources and sinks: files, images, image sequences, v4l2; MP4/WebM/PNG out.
        .target(name: "VeilMedia", dependencies: ["VeilCore", "CGStreamer"]),
        // Talking-face clips with ground truth: piecewise-affine warping of a real photo.
        .target(name: "VeilSynth", dependencies: ["VeilCore", "VeilTracking"]),
        .executableTarget(name: "veil",
                          dependencies: ["VeilCore", "VeilRender", "VeilCairo", "VeilTracking", "VeilMedia", "VeilSynth"]),

        .testTarget(name: "VeilCoreTests", dependencies: ["VeilCore"]),
        .testTarget(name: "VeilRenderTests", dependencies: ["VeilRender", "VeilCairo", "VeilCore"]),
        .testTarget(name: "VeilTrackingTests", dependencies: ["VeilTracking", "VeilCore", "VeilMedia", "VeilSynth", "VeilRender", "VeilCairo"]),
        .testTarget(name: "VeilSynthTests", dependencies: ["VeilSynth", "VeilCore", "VeilMedia", "VeilTracking"]),
        .testTarget(name: "VeilMediaTests", dependencies: ["VeilMedia", "VeilCore"]),
        .testTarget(name: "VeilCLITests", dependencies: ["VeilCore", "VeilMedia", "veil"]),
    ],
    swiftLanguageVersions: [.v5]
)
