import Foundation
import VeilConsole
#if canImport(Glibc)
import Glibc
#endif

// veil: the command-line front end. Each command lives in its own file (`Command+Name.swift`).

let overview = """
veil — talk with your facial expressions, not your face.

Veil tracks a face on this device, reduces it to an expression stream (ARKit-named blendshape
coefficients, head pose, gaze) and animates a canonical avatar with it. The face, its shape and
the background never leave the device; how the face moves does (docs/privacy.md).

USAGE: veil <command> [options]

COMMANDS:
  render INPUT -o OUTPUT   Track the face in a video, image, image sequence or camera and render the avatar.
  track INPUT --send URL   Track a face and send its expressions to VSeeFace (vmc://) or Unreal (livelink://).
  synth PHOTO -o CLIP      Make a talking-face clip with ground truth from a photo (for tests and benchmarks).
  call --server URL ...    Join a room: your voice and expressions out, the others' avatars in.
  serve                    Run the room server (WebSocket signaling, rooms, tokens).
  token --room R --user U  Issue a token that admits a user to a room.
  rig --out PATH           Write the canonical avatar as JSON data (web/avatar-rig.json; docs/avatar.md).
  demo                     A two-person call on this machine (what `make demo` runs); --offline for the pipeline alone.
  bench                    Measure Veil beside dlib, MediaPipe and video, a local call and the server under load (`make bench`).
  help [COMMAND]           Show help for a command.

Run `veil help <command>` or `veil <command> --help` for a command's options.
"""

struct Command {
    let name: String
    let help: String
    let run: ([String]) throws -> Void
}

let commands: [Command] = [renderCommand, trackCommand, synthCommand, callCommand, serveCommand, tokenCommand, rigCommand, demoCommand, benchCommand]

func main() -> Int32 {
    let args = Array(CommandLine.arguments.dropFirst())
    guard let first = args.first else { print(overview); return 0 }
    if first == "--help" || first == "-h" || first == "help" {
        if args.count > 1, let command = commands.first(where: { $0.name == args[1] }) { print(command.help) } else { print(overview) }
        return 0
    }
    if first == "--version" { print("veil 0.1.0 (wire format v\(1))"); return 0 }
    guard let command = commands.first(where: { $0.name == first }) else {
        Terminal.error("unknown command '\(first)'. Commands: \(commands.map(\.name).joined(separator: ", ")). See `veil --help`.")
        return 2
    }
    let rest = Array(args.dropFirst())
    if rest.contains("--help") || rest.contains("-h") { print(command.help); return 0 }
    do {
        try command.run(rest)
        return 0
    } catch let error as UsageError {
        Terminal.error("\(error)\nSee `veil help \(command.name)`.")
        return 2
    } catch {
        Terminal.error("\(error)")
        return 1
    }
}

exit(main())
