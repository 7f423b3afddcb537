import CLiteRt
import Foundation
import Synchronization
import VeilCore
#if canImport(Glibc)
import Glibc
#endif

/// An error from the LiteRT runtime: which call failed, on which model, and the status it returned.
public struct TrackingError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The one place LiteRT status codes become Swift errors.
@inline(__always)
func liteRt(_ status: LiteRtStatus, _ what: @autoclosure () -> String) throws {
    if status != 0 { throw TrackingError("LiteRT: \(what()) failed (status \(status))") }
}

/// Owns a LiteRT environment. Shared by the models of one tracker.
final class LiteRtRuntime {
    let handle: LiteRtEnvironment

    init() throws {
        var env: LiteRtEnvironment?
        try withRuntimeLogQuieted {
            try liteRt(LiteRtCreateEnvironment(0, nil, &env), "creating the environment")
        }
        guard let env else { throw TrackingError("LiteRT returned no environment") }
        handle = env
    }

    deinit { withRuntimeLogQuieted { LiteRtDestroyEnvironment(handle) } }
}

/// Runs `body` with stderr pointed at /dev/null, unless VEIL_VERBOSE is set. The LiteRT runtime
/// prints INFO lines on stderr when it creates and destroys environments and compiles models, and
/// offers no switch for them; Veil's own errors never pass through here. Writes to stderr from
/// other threads during these (millisecond-long) calls are lost too, which is why it stays narrow.
/// Calls from several threads at once (two trackers starting together) share one redirection: the
/// first in points stderr at /dev/null, the last out restores it.
func withRuntimeLogQuieted<T>(_ body: () throws -> T) rethrows -> T {
    if ProcessInfo.processInfo.environment["VEIL_VERBOSE"] != nil { return try body() }
    quietedStderr.withLock { state in
        state.depth += 1
        guard state.depth == 1 else { return }
        fflush(stderr)
        state.saved = dup(STDERR_FILENO)
        let null = open("/dev/null", O_WRONLY)
        if state.saved >= 0, null >= 0 { dup2(null, STDERR_FILENO) }
        if null >= 0 { close(null) }
    }
    defer {
        quietedStderr.withLock { state in
            state.depth -= 1
            guard state.depth == 0 else { return }
            fflush(stderr)
            if state.saved >= 0 { dup2(state.saved, STDERR_FILENO); close(state.saved) }
            state.saved = -1
        }
    }
    return try body()
}

/// How many `withRuntimeLogQuieted` calls are running, and the real stderr while they are.
private let quietedStderr = Mutex<(depth: Int, saved: Int32)>((0, -1))

/// One compiled .tflite model with float32 input and output buffers in memory it owns, run on the
/// CPU with one thread. Inputs are written in place through `input(_:)`; outputs are read in place
/// through `output(_:)`: no per-run allocation or copy.
final class InferenceModel {
    struct Tensor {
        let name: String
        let shape: [Int]
        let memory: UnsafeMutablePointer<Float>
        var count: Int { shape.reduce(1, *) }
    }

    let path: String
    private let runtime: LiteRtRuntime
    /// Kernels for the model's custom operations, which live as long as the compiled model.
    private let kernels: AttentionMeshKernels?
    private let mendingVersions: Bool
    /// The model's bytes when it is loaded from memory (they must outlive the model).
    private var bytes: UnsafeMutableRawBufferPointer?
    private var model: LiteRtModel?
    private var compiled: LiteRtCompiledModel?
    private var inputBuffers: [LiteRtTensorBuffer?] = []
    private var outputBuffers: [LiteRtTensorBuffer?] = []
    private(set) var inputs: [Tensor] = []
    private(set) var outputs: [Tensor] = []

    /// Loads and compiles the model at `url`; with `kernels`, its custom operations run on them
    /// (`mendingVersions` false leaves the model's operator codes as they are: for tests).
    init(runtime: LiteRtRuntime, url: URL, kernels: AttentionMeshKernels? = nil, mendingVersions: Bool = true) throws {
        self.runtime = runtime
        self.kernels = kernels
        self.mendingVersions = mendingVersions
        path = url.path
        do { try withRuntimeLogQuieted(load) } catch { release(); throw error }
    }

    deinit { release() }

    private func load() throws {
        let name = (path as NSString).lastPathComponent
        if kernels == nil {
            try liteRt(LiteRtCreateModelFromFile(runtime.handle, path, &model), "loading \(path)")
        } else {
            // LiteRT registers custom kernels as version 1: the model's operator codes are mended
            // in memory to ask for that (ModelBytes.customOperatorsAsVersionOne).
            let data: Data
            do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
                throw TrackingError("cannot read \(path): \(error.localizedDescription)")
            }
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: data.count, alignment: 64)
            copy.copyBytes(from: data)
            bytes = copy
            let found = mendingVersions ? try ModelBytes.customOperatorsAsVersionOne(copy, names: AttentionMeshKernels.names)
                                        : AttentionMeshKernels.names
            guard found == AttentionMeshKernels.names else {
                throw TrackingError("\(name) has not the attention mesh's custom operations (found: \(found.sorted()))")
            }
            try liteRt(LiteRtCreateModelFromBuffer(runtime.handle, copy.baseAddress, copy.count, &model), "loading \(path)")
        }
        var options: LiteRtOptions?
        try liteRt(LiteRtCreateOptions(&options), "creating options")
        defer { LiteRtDestroyOptions(options) }
        try liteRt(LiteRtSetOptionsHardwareAccelerators(options, 1), "selecting the CPU")
        // One thread: on two cores, a second XNNPACK thread was measured slower (see DESIGN.md).
        var cpu: LiteRtOpaqueOptions?
        let toml = strdup("num_threads = 1\n")
        try liteRt(LiteRtCreateOpaqueOptions("xnnpack", toml, { free($0) }, &cpu), "creating CPU options")
        try liteRt(LiteRtAddOpaqueOptions(options, cpu), "adding CPU options")
        try kernels?.register(with: options)
        try liteRt(LiteRtCreateCompiledModel(runtime.handle, model, options, &compiled), "compiling \(name)")
        try kernels?.checkResolved()

        var signature: LiteRtSignature?
        try liteRt(LiteRtGetModelSignature(model, 0, &signature), "reading the signature of \(name)")
        var inputCount: LiteRtParamIndex = 0, outputCount: LiteRtParamIndex = 0
        try liteRt(LiteRtGetNumSignatureInputs(signature, &inputCount), "counting inputs")
        try liteRt(LiteRtGetNumSignatureOutputs(signature, &outputCount), "counting outputs")
        for isInput in [true, false] {
            for index in 0..<(isInput ? inputCount : outputCount) {
                var tensor: LiteRtTensor?
                var cName: UnsafePointer<CChar>?
                if isInput {
                    try liteRt(LiteRtGetSignatureInputTensorByIndex(signature, index, &tensor), "input \(index)")
                    try liteRt(LiteRtGetSignatureInputName(signature, index, &cName), "input name \(index)")
                } else {
                    try liteRt(LiteRtGetSignatureOutputTensorByIndex(signature, index, &tensor), "output \(index)")
                    try liteRt(LiteRtGetSignatureOutputName(signature, index, &cName), "output name \(index)")
                }
                var type = LiteRtRankedTensorType()
                try liteRt(LiteRtGetRankedTensorType(tensor, &type), "tensor type")
                guard type.element_type == 1 else { throw TrackingError("\(name): tensor \(index) is not float32") }
                let shape = withUnsafeBytes(of: type.layout.dimensions) {
                    Array($0.bindMemory(to: Int32.self).prefix(Int(type.layout.rank))).map(Int.init)
                }
                let count = shape.reduce(1, *)
                let bytes = (count * 4 + 63) & ~63
                var raw: UnsafeMutableRawPointer?
                guard posix_memalign(&raw, 64, bytes) == 0, let raw else { throw TrackingError("out of memory") }
                memset(raw, 0, bytes)
                var buffer: LiteRtTensorBuffer?
                let status = LiteRtCreateTensorBufferFromHostMemory(&type, raw, bytes, nil, &buffer)
                let t = Tensor(name: cName.map { String(cString: $0) } ?? "\(index)", shape: shape,
                               memory: raw.bindMemory(to: Float.self, capacity: count))
                if isInput { inputs.append(t); inputBuffers.append(buffer) } else { outputs.append(t); outputBuffers.append(buffer) }
                try liteRt(status, "wrapping a buffer for \(name)")
            }
        }
    }

    private func release() {
        for b in inputBuffers + outputBuffers where b != nil { LiteRtDestroyTensorBuffer(b) }
        inputBuffers = []; outputBuffers = []
        for t in inputs + outputs { free(t.memory) }
        inputs = []; outputs = []
        if let compiled { LiteRtDestroyCompiledModel(compiled) }
        if let model { LiteRtDestroyModel(model) }
        compiled = nil; model = nil
        bytes?.deallocate()
        bytes = nil
    }

    /// The input tensor's memory, to be filled before `run()`.
    func input(_ index: Int = 0) -> UnsafeMutableBufferPointer<Float> {
        UnsafeMutableBufferPointer(start: inputs[index].memory, count: inputs[index].count)
    }

    /// The output whose name is `name`, or whose element count is `count` (names differ between
    /// model exports; sizes do not).
    func output(named name: String? = nil, count: Int? = nil) throws -> UnsafeBufferPointer<Float> {
        guard let t = outputs.first(where: { (name != nil && $0.name == name) || (count != nil && $0.count == count) }) else {
            throw TrackingError("\((path as NSString).lastPathComponent) has no output \(name ?? "of size \(count ?? 0)")")
        }
        return UnsafeBufferPointer(start: t.memory, count: t.count)
    }

    func run() throws {
        kernels?.beginInference()
        try liteRt(LiteRtRunCompiledModel(compiled, 0, inputBuffers.count, &inputBuffers, outputBuffers.count, &outputBuffers),
                   "running \((path as NSString).lastPathComponent)")
        try kernels?.finishInference()
    }
}

