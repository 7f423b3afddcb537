let demoCommand = Command(name: "demo", help: "veil demo", run: { _ in throw UsageError("pending") })
