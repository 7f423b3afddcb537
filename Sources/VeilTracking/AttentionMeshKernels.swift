import CLiteRt
import Foundation
import VeilConsole

/// LiteRT kernels for the attention mesh's three custom operations (`AttentionMeshOperations` does
/// the arithmetic). How LiteRT 2.3.0 drives a custom kernel shapes this class:
///
/// - One registration serves every node of an operation, and `Run` is not told which node it runs.
///   Nodes run in the model's operator order, the order their `Init`s came in, so each inference
///   counts its runs from zero (`beginInference`) and the n-th run is the n-th node's.
/// - The statuses kernels return are ignored, so a kernel records what went wrong (`failure`) and
///   the model checks it after each inference (`finishInference`).
/// - An operation the runtime could not resolve fails no compilation: `checkResolved` tells it by
///   the kernel's `Init`s, which every resolved node calls.
final class AttentionMeshKernels {
    enum Operation: String, CaseIterable {
        case landmarksToTransformMatrix = "Landmarks2TransformMatrix"
        case transformTensorBilinear = "TransformTensorBilinear"
        case transformLandmarks = "TransformLandmarks"
    }

    /// One operation's kernel: the options of each of its nodes, in the model's order.
    final class Kernel {
        let operation: Operation
        /// `Landmarks2TransformMatrix`: each node's options (nil: unreadable).
        fileprivate(set) var matrixOptions: [AttentionMeshOperations.TransformMatrixOptions?] = []
        /// `TransformTensorBilinear`: each node's output height and width.
        fileprivate var outputSizes: [(height: Int, width: Int)?] = []
        fileprivate(set) var nodes = 0
        fileprivate var layoutCalls = 0
        fileprivate var runs = 0
        fileprivate var failure: String?
        fileprivate var milliseconds = 0.0

        init(_ operation: Operation) { self.operation = operation }

        fileprivate func fail(_ message: String) {
            if failure == nil { failure = "\(operation.rawValue): \(message)" }
        }
    }

    let kernels = Operation.allCases.map(Kernel.init)
    /// Time spent in the kernels during the last inference.
    var lastInferenceMilliseconds: Double { kernels.reduce(0) { $0 + $1.milliseconds } }

    func kernel(_ operation: Operation) -> Kernel { kernels.first { $0.operation == operation }! }

    /// The operations' names, as the model's operator codes name them.
    static var names: Set<String> { Set(Operation.allCases.map(\.rawValue)) }

    /// Adds the three kernels to a compilation's options. They must outlive the compiled model.
    func register(with options: LiteRtOptions?) throws {
        for kernel in kernels {
            var table = Self.table
            try liteRt(LiteRtAddCustomOpKernelOption(options, kernel.operation.rawValue, 1, &table,
                                                     Unmanaged.passUnretained(kernel).toOpaque()),
                       "registering the \(kernel.operation.rawValue) kernel")
        }
    }

    /// Throws unless the compiled model initialised a node of every operation with readable options.
    func checkResolved() throws {
        for kernel in kernels {
            guard kernel.nodes > 0 else {
                throw TrackingError("the attention mesh's \(kernel.operation.rawValue) operation was not resolved by LiteRT")
            }
            if let failure = kernel.failure { throw TrackingError("attention mesh: \(failure)") }
        }
    }

    func beginInference() {
        for kernel in kernels { kernel.runs = 0; kernel.milliseconds = 0 }
    }

    /// Throws when a kernel failed, or did not run each of its nodes once, during the inference.
    func finishInference() throws {
        for kernel in kernels {
            if let failure = kernel.failure {
                kernel.failure = nil
                throw TrackingError("attention mesh: \(failure)")
            }
            guard kernel.runs == kernel.nodes else {
                throw TrackingError("attention mesh: \(kernel.operation.rawValue) ran \(kernel.runs) times for \(kernel.nodes) nodes")
            }
        }
    }

    // MARK: - The C entry points

    private static func kernel(_ user: UnsafeMutableRawPointer?) -> Kernel {
        Unmanaged<Kernel>.fromOpaque(user!).takeUnretainedValue()
    }

    private static let table = LiteRtCustomOpKernel(
        Init: { user, data, size in
            let kernel = AttentionMeshKernels.kernel(user)
            let bytes = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size)
            kernel.nodes += 1
            switch kernel.operation {
            case .landmarksToTransformMatrix:
                let options = AttentionMeshKernels.matrixOptions(bytes)
                if options == nil { kernel.fail("node \(kernel.nodes) has unreadable options") }
                kernel.matrixOptions.append(options)
            case .transformTensorBilinear:
                let map = ModelBytes.flexMap(bytes)
                let height = map?["output_height"].flatMap { ModelBytes.flexInt(bytes, $0) }
                let width = map?["output_width"].flatMap { ModelBytes.flexInt(bytes, $0) }
                if let height, let width, height > 0, width > 0, height <= 4096, width <= 4096 {
                    kernel.outputSizes.append((height, width))
                } else {
                    kernel.fail("node \(kernel.nodes) has no output size")
                    kernel.outputSizes.append(nil)
                }
            case .transformLandmarks:
                break
            }
            return 0
        },
        GetOutputLayouts: { user, inputCount, inputs, outputCount, outputs in
            let kernel = AttentionMeshKernels.kernel(user)
            guard let inputs, let outputs, inputCount >= 1, outputCount >= 1 else {
                kernel.fail("called without layouts")
                return 1
            }
            let node = kernel.layoutCalls % max(kernel.nodes, 1)
            kernel.layoutCalls += 1
            switch kernel.operation {
            case .landmarksToTransformMatrix:
                outputs[0] = layout([1, 4, 4])
            case .transformTensorBilinear:
                let input = dimensions(inputs[0])
                guard input.count == 4, node < kernel.outputSizes.count, let size = kernel.outputSizes[node] else {
                    kernel.fail("input of rank \(input.count)")
                    return 1
                }
                outputs[0] = layout([1, size.height, size.width, input[3]])
            case .transformLandmarks:
                outputs[0] = layout(dimensions(inputs[0]))
            }
            return 0
        },
        Run: { user, inputCount, inputs, outputCount, outputs in
            let kernel = AttentionMeshKernels.kernel(user)
            let node = kernel.runs
            kernel.runs += 1
            guard let inputs, let outputs, outputCount >= 1, inputCount >= (kernel.operation == .landmarksToTransformMatrix ? 1 : 2),
                  node < kernel.nodes else {
                kernel.fail("run \(node + 1) of \(kernel.nodes) nodes, \(inputCount) inputs")
                return 1
            }
            let start = monotonicMilliseconds()
            defer { kernel.milliseconds += monotonicMilliseconds() - start }
            do {
                try AttentionMeshKernels.run(kernel, node: node, inputs: inputs, outputs: outputs)
            } catch {
                kernel.fail("\(error)")
                return 1
            }
            return 0
        },
        Destroy: { _ in 0 })

    private static func run(_ kernel: Kernel, node: Int, inputs: UnsafePointer<LiteRtTensorBuffer?>,
                            outputs: UnsafeMutablePointer<LiteRtTensorBuffer?>) throws {
        let input = try Mapped(inputs[0], writing: false)
        defer { input.unlock() }
        let output = try Mapped(outputs[0], writing: true)
        defer { output.unlock() }
        switch kernel.operation {
        case .landmarksToTransformMatrix:
            guard let options = kernel.matrixOptions[node] else { throw TrackingError("no options") }
            guard output.count >= 16,
                  let matrix = AttentionMeshOperations.landmarksToTransformMatrix(input.readable, options: options) else {
                throw TrackingError("landmarks of shape \(input.shape) do not fit the options")
            }
            for k in 0..<16 { output.memory[k] = matrix[k] }
        case .transformTensorBilinear:
            let matrix = try Mapped(inputs[1], writing: false)
            defer { matrix.unlock() }
            guard input.shape.count == 4, output.shape.count == 4, matrix.count >= 16, input.shape[3] == output.shape[3] else {
                throw TrackingError("shapes \(input.shape), \(matrix.shape) → \(output.shape)")
            }
            AttentionMeshOperations.transformTensorBilinear(
                input.readable, height: input.shape[1], width: input.shape[2], channels: input.shape[3],
                matrix: Array(matrix.readable.prefix(16)), into: output.writable,
                outputHeight: output.shape[1], outputWidth: output.shape[2])
        case .transformLandmarks:
            let matrix = try Mapped(inputs[1], writing: false)
            defer { matrix.unlock() }
            guard matrix.count >= 16, output.count == input.count, let dimensions = input.shape.last, dimensions >= 2 else {
                throw TrackingError("shapes \(input.shape), \(matrix.shape) → \(output.shape)")
            }
            AttentionMeshOperations.transformLandmarks(input.readable, dimensions: dimensions,
                                                       matrix: Array(matrix.readable.prefix(16)), into: output.writable)
        }
    }

    /// A tensor buffer's float memory, locked for the length of one run.
    private struct Mapped {
        let buffer: LiteRtTensorBuffer?
        let memory: UnsafeMutablePointer<Float>
        let shape: [Int]
        var count: Int { shape.reduce(1, *) }
        var readable: UnsafeBufferPointer<Float> { UnsafeBufferPointer(start: memory, count: count) }
        var writable: UnsafeMutableBufferPointer<Float> { UnsafeMutableBufferPointer(start: memory, count: count) }

        init(_ buffer: LiteRtTensorBuffer?, writing: Bool) throws {
            var type = LiteRtRankedTensorType()
            try liteRt(LiteRtGetTensorBufferTensorType(buffer, &type), "reading a tensor's type")
            guard type.element_type == 1 else { throw TrackingError("a tensor is not float32") }
            var raw: UnsafeMutableRawPointer?
            try liteRt(LiteRtLockTensorBuffer(buffer, &raw, writing ? 1 : 0), "locking a tensor")
            guard let raw else { LiteRtUnlockTensorBuffer(buffer); throw TrackingError("a tensor has no memory") }
            self.buffer = buffer
            shape = dimensions(type.layout)
            memory = raw.bindMemory(to: Float.self, capacity: shape.reduce(1, *))
        }

        func unlock() { LiteRtUnlockTensorBuffer(buffer) }
    }

    /// A `Landmarks2TransformMatrix` node's options from their FlexBuffers bytes.
    static func matrixOptions(_ bytes: UnsafeRawBufferPointer) -> AttentionMeshOperations.TransformMatrixOptions? {
        guard let map = ModelBytes.flexMap(bytes),
              let left = map["left_rotation_idx"].flatMap({ ModelBytes.flexInt(bytes, $0) }),
              let right = map["right_rotation_idx"].flatMap({ ModelBytes.flexInt(bytes, $0) }),
              let subset = map["subset_idxs"].flatMap({ ModelBytes.flexInts(bytes, $0) }), !subset.isEmpty else { return nil }
        var options = AttentionMeshOperations.TransformMatrixOptions(leftRotationIndex: left, rightRotationIndex: right, subset: subset)
        if let width = map["output_width"].flatMap({ ModelBytes.flexInt(bytes, $0) }) { options.outputWidth = width }
        if let height = map["output_height"].flatMap({ ModelBytes.flexInt(bytes, $0) }) { options.outputHeight = height }
        if let scale = map["scale_x"].flatMap({ ModelBytes.flexFloat(bytes, $0) }) { options.scaleX = scale }
        if let scale = map["scale_y"].flatMap({ ModelBytes.flexFloat(bytes, $0) }) { options.scaleY = scale }
        if let rotation = map["target_rotation_radians"].flatMap({ ModelBytes.flexFloat(bytes, $0) }) { options.targetRotation = rotation }
        return options
    }
}

/// A layout's dimensions.
private func dimensions(_ layout: LiteRtLayout) -> [Int] {
    withUnsafeBytes(of: layout.dimensions) { Array($0.bindMemory(to: Int32.self).prefix(Int(layout.rank))).map(Int.init) }
}

/// A dense layout of `shape`.
private func layout(_ shape: [Int]) -> LiteRtLayout {
    var layout = LiteRtLayout()
    layout.rank = UInt32(shape.count)
    withUnsafeMutableBytes(of: &layout.dimensions) { raw in
        let dims = raw.bindMemory(to: Int32.self)
        for (k, d) in shape.prefix(8).enumerated() { dims[k] = Int32(d) }
    }
    return layout
}
