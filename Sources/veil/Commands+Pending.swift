let benchCommand = Command(name: "bench", help: "veil bench", run: { _ in throw UsageError("pending") })
