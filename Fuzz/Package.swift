// swift-tools-version:5.10
import Foundation
import PackageDescription

// libFuzzer harnesses for VeilCore's parsers of untrusted input. A package of its own so that the
// root package's `swift build` and `swift test` never see executables without `main`: libFuzzer
// supplies `main` when these are built with `-sanitize=fuzzer` (scripts/fuzz does that; see
// docs/reliability.md, "Fuzzing").

// A path dependency's identity is its directory's name, which is whatever the checkout is called.
let veil = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent()

let package = Package(
    name: "VeilFuzz",
    dependencies: [.package(path: veil.path)],
    targets: [
        // The invariants each harness checks, as plain functions (also usable without libFuzzer).
        .target(name: "VeilFuzzChecks", dependencies: [.product(name: "VeilCore", package: veil.lastPathComponent)]),
        // libFuzzer's C entry point, `LLVMFuzzerRunDriver` (a header only).
        .target(name: "CLibFuzzer"),
        // One libFuzzer harness per parser: `main` hands the input callback to libFuzzer's driver.
        .executableTarget(name: "FuzzExpressionFrame", dependencies: ["VeilFuzzChecks", "CLibFuzzer"]),
        .executableTarget(name: "FuzzSignaling", dependencies: ["VeilFuzzChecks", "CLibFuzzer"]),
        .executableTarget(name: "FuzzToken", dependencies: ["VeilFuzzChecks", "CLibFuzzer"]),
        .executableTarget(name: "FuzzWebSocket", dependencies: ["VeilFuzzChecks", "CLibFuzzer"]),
    ],
    swiftLanguageVersions: [.v5]
)
