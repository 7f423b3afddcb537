#!/usr/bin/env python3
"""Turn MediaPipe's face_mesh_connections.py (from the mediapipe wheel) into Veil's topology JSON.

The source file is data: frozensets of (a, b) index pairs. It is parsed, never executed.
Output: edges per region, ordered contours, and the mesh triangles (3-cliques of the tessellation).
"""
import json, re, sys
from collections import defaultdict

src = open(sys.argv[1]).read()
sets = {}
for m in re.finditer(r"^(FACEMESH_[A-Z_]+)\s*=\s*frozenset\(\[(.*?)\]\)", src, re.S | re.M):
    sets[m.group(1)] = sorted({tuple(sorted(map(int, p))) for p in re.findall(r"\((\d+),\s*(\d+)\)", m.group(2))})

def chains(edges):
    """Split an edge set into maximal ordered paths (closed loops repeat no vertex)."""
    adj = defaultdict(list)
    for a, b in edges:
        adj[a].append(b); adj[b].append(a)
    used, out = set(), []
    starts = sorted([v for v in adj if len(adj[v]) == 1]) + sorted(adj)
    for s in starts:
        for n in sorted(adj[s]):
            if (min(s, n), max(s, n)) in used:
                continue
            path, prev, cur = [s], s, n
            used.add((min(s, n), max(s, n)))
            while True:
                path.append(cur)
                nxt = [x for x in adj[cur] if (min(cur, x), max(cur, x)) not in used]
                if not nxt:
                    break
                used.add((min(cur, nxt[0]), max(cur, nxt[0])))
                prev, cur = cur, nxt[0]
            if path[0] == path[-1]:
                path.pop()
            out.append(path)
    return out

need = ["FACEMESH_LIPS", "FACEMESH_LEFT_EYE", "FACEMESH_RIGHT_EYE", "FACEMESH_LEFT_EYEBROW",
        "FACEMESH_RIGHT_EYEBROW", "FACEMESH_FACE_OVAL", "FACEMESH_TESSELATION"]
missing = [n for n in need if n not in sets]
if missing:
    sys.exit(f"face_mesh_connections.py lacks {missing}: wrong mediapipe version?")

adj = defaultdict(set)
for a, b in sets["FACEMESH_TESSELATION"]:
    adj[a].add(b); adj[b].add(a)
triangles = sorted({tuple(sorted((a, b, c))) for a in adj for b in adj[a] if b > a
                    for c in adj[a] & adj[b] if c > b})

out = {"source": "mediapipe 0.10.14 mediapipe/python/solutions/face_mesh_connections.py",
       "contours": {k[len("FACEMESH_"):].lower(): chains(v) for k, v in sets.items() if k != "FACEMESH_TESSELATION"},
       "triangles": triangles}
json.dump(out, open(sys.argv[2], "w"), separators=(",", ":"))
print(f"topology: {len(triangles)} triangles, regions {sorted(out['contours'])}")
