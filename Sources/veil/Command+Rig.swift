import Foundation
import VeilCore
import VeilRender
import VeilConsole

let rigCommand = Command(name: "rig", help: """
USAGE: veil rig --out PATH

Writes the canonical avatar as versioned JSON data: the face's rest points, each ARKit
blendshape's displacement field, the outline and hair meridians, the pivot, the solve's limits,
and the named styles and backgrounds (docs/avatar.md). Veil's Swift renderer and the browser's
canvas renderer (web/avatar.js) draw from this same data; the repository keeps it at
web/avatar-rig.json, and a test fails when that file and the design in
Sources/VeilRender/AvatarRig+Design.swift differ. After changing the design, run
`veil rig --out web/avatar-rig.json`.

The output is deterministic: the same design always gives the same bytes.

OPTIONS:
  --out PATH   Where to write the JSON (- for standard output)
""", run: runRig)

func runRig(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["out"], booleans: [], aliases: ["o": "out"])
    guard args.positionals.isEmpty else { throw UsageError("rig takes no positional arguments") }
    guard let out = args.value("out"), !out.isEmpty else { throw UsageError("rig needs --out PATH (e.g. web/avatar-rig.json)") }
    let json = try AvatarRigData.design.jsonData()
    if out == "-" {
        FileHandle.standardOutput.write(json)
        return
    }
    do {
        try json.write(to: URL(fileURLWithPath: out), options: .atomic)
    } catch {
        throw VeilError.io("cannot write the avatar rig to \(out): \(error.localizedDescription)")
    }
    Terminal.note("wrote the avatar rig (version \(AvatarRigData.currentVersion), \(json.count) bytes) to \(out)")
}
