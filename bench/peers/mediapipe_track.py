#!/usr/bin/env python3
"""MediaPipe Face Mesh as its users run it, for `veil bench`.

The legacy `mediapipe.solutions.face_mesh` API of mediapipe 0.10.14 (its bundled face detector and
468-point mesh, plus the attention mesh's lips, eyes and irises with --refine 1), on the CPU.

Input: raw RGB24 frames (width x height x 3 bytes each, back to back, no header), written by
`veil bench`. Output: one JSON object on stdout. Only `FaceMesh.process` is timed.

usage: mediapipe_track.py --refine 0|1 --width W --height H [--warmup N]
                          [--clip NAME FILE]... [--still NAME FILE]...
  --clip   frames tracked one after another as a video (static_image_mode=False, so the detector
           runs only when the mesh has lost the face); the first N frames (--warmup) run once
           first, not timed, then the graph is reset and the whole clip is timed
  --still  single frames (static_image_mode=True); the face's mesh points in pixels
Exit status: 0 on success, 1 when an input cannot be read or MediaPipe fails, 2 for a usage mistake.
"""

import argparse
import json
import os
import sys
import time

# One thread where the libraries let us choose; the caller also pins the process to one core.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                  "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("GLOG_minloglevel", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description="MediaPipe Face Mesh timing and landmarks for veil bench")
    parser.add_argument("--refine", type=int, choices=(0, 1), required=True,
                        help="refine_landmarks: 1 adds the attention mesh (lips, eyes, irises)")
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--height", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--clip", nargs=2, action="append", default=[], metavar=("NAME", "FILE"))
    parser.add_argument("--still", nargs=2, action="append", default=[], metavar=("NAME", "FILE"))
    args = parser.parse_args(argv)
    if args.width <= 0 or args.height <= 0 or args.warmup < 0:
        parser.error("--width and --height must be positive, --warmup not negative")
    return args


def read_frames(path, width, height):
    """Every frame of a raw RGB24 file as an array of shape (frames, height, width, 3)."""
    frame_bytes = width * height * 3
    size = os.path.getsize(path)
    if size == 0 or size % frame_bytes != 0:
        raise ValueError(f"{path}: {size} bytes is not a whole number of {width}x{height} RGB frames")
    return np.fromfile(path, dtype=np.uint8).reshape(size // frame_bytes, height, width, 3)


def run_clip(face_mesh_module, refine, name, path, args, load_ms):
    """Times every frame of one clip; adds the graph's construction time to `load_ms[0]`."""
    frames = read_frames(path, args.width, args.height)
    started = time.perf_counter()
    with face_mesh_module.FaceMesh(static_image_mode=False, max_num_faces=1, refine_landmarks=refine) as mesh:
        load_ms[0] += (time.perf_counter() - started) * 1000
        for frame in frames[:args.warmup]:
            mesh.process(frame)
        mesh.reset()
        milliseconds, faces = [], []
        for frame in frames:
            start = time.perf_counter()
            result = mesh.process(frame)
            milliseconds.append((time.perf_counter() - start) * 1000)
            faces.append(len(result.multi_face_landmarks or []))
    return {"name": name, "milliseconds": [round(m, 4) for m in milliseconds], "faces": faces}


def run_still(face_mesh_module, refine, name, path, args):
    frames = read_frames(path, args.width, args.height)
    with face_mesh_module.FaceMesh(static_image_mode=True, max_num_faces=1, refine_landmarks=refine) as mesh:
        result = mesh.process(frames[0])
    faces = []
    for landmarks in result.multi_face_landmarks or []:
        # Normalised to the frame's width and height; depth is on the scale of x.
        faces.append({"points": [[round(p.x * args.width, 3), round(p.y * args.height, 3), round(p.z * args.width, 3)]
                                 for p in landmarks.landmark]})
    return {"name": name, "faces": faces}


def main(argv):
    args = parse_arguments(argv)
    try:
        started = time.perf_counter()
        import mediapipe
        from mediapipe.python.solutions import face_mesh as face_mesh_module
        # Import plus the first graph's construction: paid once, not per frame.
        load_ms = [(time.perf_counter() - started) * 1000]
        refine = bool(args.refine)
        clips = [run_clip(face_mesh_module, refine, name, path, args, load_ms if index == 0 else [0.0])
                 for index, (name, path) in enumerate(args.clip)]
        report = {
            "tracker": f"mediapipe {mediapipe.__version__} solutions.face_mesh, refine_landmarks={refine}, CPU",
            "loadMilliseconds": round(load_ms[0], 1),
            "clips": clips,
            "stills": [run_still(face_mesh_module, refine, name, path, args) for name, path in args.still],
        }
    except Exception as error:  # the caller reports the message; a traceback would only bury it
        print(f"mediapipe_track: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
