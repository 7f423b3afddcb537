let demoCommand = Command(name: "demo", help: "veil demo", run: { _ in throw UsageError("pending") })
let benchCommand = Command(name: "bench", help: "veil bench", run: { _ in throw UsageError("pending") })
