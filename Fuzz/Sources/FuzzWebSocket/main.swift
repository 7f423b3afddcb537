import CLibFuzzer
import Glibc
import VeilFuzzChecks

// libFuzzer with `FuzzHarness.webSocket`'s checks: each input it generates goes through them, and a
// broken invariant aborts, which libFuzzer reports as a crash (saving the input).
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    FuzzHarness.webSocket.runFuzzerInput(data, size)
})
