"""The attacker of Veil's re-identification experiment, and the expression each stream carries.

usage: attack.py SESSIONS_DIR [--json OUT.json] [--quick] [--tuned-only] [--streams A,B] [--attackers A,B]

Reads what `veil-privacy` recorded (index.jsonl and the .f32 stream files) and asks, per stream
(raw landmarks, and what each privacy level sends: strict, standard, off): how often does an attacker who holds earlier
recordings of every person name the person behind a later one, from 1 s, 10 s, 60 s or the whole
session of it? And how much of what was performed does each stream show?

Attackers (all trained on the other sessions of every person: leave one session out, so each
person's test session is unseen and the attacker holds SESSIONS-1 earlier recordings of each):
  nearest neighbour     1-NN on per-second mean and deviation of every channel (standardised), the
                        regression guard's attacker; its votes are summed over longer windows
  logistic regression   multinomial, L2, on the same features; log-probabilities summed over windows
  random forest         on richer features of 10-s windows: percentiles, a histogram, frame-to-frame
                        jitter and cross-channel correlations of the main channels, blink and smile
                        event statistics, the lost-frame rate; log-probabilities summed over windows
--tuned-only leaves the held-out people out altogether (what tuning a privacy level may look at);
--streams and --attackers choose among the streams (landmarks and the levels) and the attackers.
Chance is 1 / people; its 95 % bound is binomial over the windows scored (which share a session's
calibration, so the bound is optimistic for short windows) and over whole sessions (independent).
"""
import json
import math
import os
import sys

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

SHAPES = 52
WIDTH = SHAPES + 6  # coefficients, yaw, pitch, roll, gaze x, gaze y, tracked
# Column indices by name, from the recording's columns.json (set by load()).
I = {}
YAW, PITCH, ROLL, GX, GY, TRACKED = SHAPES, SHAPES + 1, SHAPES + 2, SHAPES + 3, SHAPES + 4, SHAPES + 5
# The script's columns (jaw drop, blinks, smile, brow raise, yaw, frown, pucker, pitch, gaze; set by load()).
T = {}
STREAMS = []  # what each privacy level sends, the default first (set by load())


def load(directory):
    if not os.path.exists(os.path.join(directory, "columns.json")):
        sys.exit(f"attack.py: {directory} holds no recording (run veil-privacy --out {directory} first, or make privacy)")
    columns = json.load(open(os.path.join(directory, "columns.json")))
    if len(columns["stream"]) != WIDTH or "streams" not in columns:
        sys.exit(f"attack.py: {directory} was recorded by another version of veil-privacy (record it again)")
    I.update({name: k for k, name in enumerate(columns["stream"])})
    T.update({name: k for k, name in enumerate(columns["truth"])})
    STREAMS[:] = columns["streams"]
    MAIN[:] = [I[name] for name in MAIN_NAMES] + [YAW, PITCH, ROLL, GX, GY]
    sessions = [json.loads(line) for line in open(os.path.join(directory, "index.jsonl")) if line.strip()]
    for s in sessions:
        stem = os.path.join(directory, f"{s['person']}.{s['session']}")
        fps = s["framesPerSecond"]
        skip = int(round(s["warmUpSeconds"] * fps))
        s["truth"] = np.fromfile(stem + ".truth.f32", dtype="<f4").reshape(-1, len(T))[skip:]
        for stream in STREAMS:
            s[stream] = np.fromfile(stem + f".{stream}.f32", dtype="<f4").reshape(-1, WIDTH)[skip:]
        s["landmarks"] = np.fromfile(stem + ".landmarks.f32", dtype="<f4").reshape(-1, 936)[int(round(s["warmUpSeconds"])):]
        s["fps"] = int(round(fps))
    return sessions


# --- features -----------------------------------------------------------------------------------

def second_features(frames, fps):
    """Per second: mean and deviation of every channel over tracked frames, and the lost fraction."""
    rows = []
    for start in range(0, len(frames) - fps + 1, fps):
        window = frames[start:start + fps]
        tracked = window[window[:, TRACKED] > 0.5, :TRACKED]
        lost = 1 - len(tracked) / len(window)
        if len(tracked) == 0:
            rows.append(np.concatenate([np.zeros(2 * TRACKED), [lost]]))
        else:
            rows.append(np.concatenate([tracked.mean(0), tracked.std(0), [lost]]))
    return np.array(rows)


def landmark_features(per_second):
    return np.nan_to_num(per_second, nan=0.0)


MAIN_NAMES = ["jawOpen", "mouthSmileLeft", "mouthSmileRight", "browInnerUp", "browOuterUpLeft", "mouthFrownLeft",
              "mouthPucker", "mouthFunnel", "eyeBlinkLeft", "eyeBlinkRight", "eyeSquintLeft", "mouthDimpleLeft", "cheekSquintLeft"]
MAIN = []  # their columns, then yaw, pitch, roll and gaze (set by load())


def events(signal, threshold):
    """(count, mean length in frames) of runs above threshold."""
    above = signal > threshold
    edges = np.diff(np.concatenate([[0], above.astype(np.int8), [0]]))
    starts, ends = np.where(edges == 1)[0], np.where(edges == -1)[0]
    if len(starts) == 0:
        return 0.0, 0.0
    return float(len(starts)), float(np.mean(ends - starts))


def rich_features(window):
    """Standard features of one window of frames (the strong learner's input)."""
    tracked = window[window[:, TRACKED] > 0.5]
    lost = 1 - len(tracked) / max(len(window), 1)
    if len(tracked) < 3:
        return None
    x = tracked[:, MAIN]
    out = [lost]
    out += list(np.percentile(x, [5, 25, 50, 75, 95], axis=0).ravel())
    out += list(x.std(0))
    out += list(np.abs(np.diff(x, axis=0)).mean(0))  # frame-to-frame jitter
    for column in range(x.shape[1]):  # a 6-bin histogram over each channel's own range
        lo, hi = (-30, 30) if MAIN[column] in (YAW, PITCH, ROLL) else ((-1, 1) if MAIN[column] in (GX, GY) else (0, 1))
        counts, _ = np.histogram(x[:, column], bins=6, range=(lo, hi))
        out += list(counts / len(x))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.corrcoef(x.T)
    upper = corr[np.triu_indices(len(MAIN), 1)]
    out += list(np.nan_to_num(upper, nan=0.0))
    blink = (tracked[:, I["eyeBlinkLeft"]] + tracked[:, I["eyeBlinkRight"]]) / 2
    for signal, threshold in ((blink, 0.5), (tracked[:, I["mouthSmileLeft"]], 0.2), (tracked[:, I["browInnerUp"]], 0.2),
                              (tracked[:, I["jawOpen"]], 0.15), (np.abs(tracked[:, I["eyeBlinkLeft"]] - tracked[:, I["eyeBlinkRight"]]), 0.3)):
        count, length = events(signal, threshold)
        out += [count / len(window), length]
    out += list(tracked[:, :TRACKED].mean(0))  # every channel's mean, the rest included
    return np.array(out, dtype=np.float64)


def windows(frames, fps, seconds):
    step = fps * seconds
    return [frames[s:s + step] for s in range(0, len(frames) - step + 1, step)]


# --- scoring ------------------------------------------------------------------------------------

def bound(chance, n):
    """One-sided 95 % upper bound of the accuracy of a guesser, binomial over n independent tries."""
    return chance + 1.645 * math.sqrt(chance * (1 - chance) / max(n, 1))


class Scores:
    """Correct/total per window length and role."""

    def __init__(self):
        self.counts = {}

    def add(self, length, role, correct):
        c = self.counts.setdefault((length, role), [0, 0])
        c[0] += int(correct)
        c[1] += 1

    def get(self, length, role):
        c = self.counts.get((length, role), [0, 0])
        return c[0], c[1]


def summed_predictions(log_probs, lengths, per_window_seconds):
    """For each window length (seconds), the argmax of summed evidence over consecutive windows."""
    out = {}
    n = len(log_probs)
    for length in lengths:
        if length == "whole":
            out[length] = [int(np.argmax(log_probs.sum(0)))] if n else []
            continue
        k = max(1, length // per_window_seconds)
        out[length] = [int(np.argmax(log_probs[s:s + k].sum(0))) for s in range(0, n - k + 1, k)]
    return out


def evaluate(sessions, stream, attacker, quick=False):
    people = sorted({s["person"] for s in sessions})
    label = {p: k for k, p in enumerate(people)}
    folds = sorted({s["session"] for s in sessions})
    scores = Scores()
    for fold in folds:
        train = [s for s in sessions if s["session"] != fold]
        test = [s for s in sessions if s["session"] == fold]
        if attacker == "forest":
            unit = 10
            def featurise(s):
                if stream == "landmarks":
                    rows = [landmark_features(s["landmarks"][k:k + unit]).mean(0) for k in range(0, len(s["landmarks"]) - unit + 1, unit)]
                    return [r for r in rows]
                return [f for f in (rich_features(w) for w in windows(s[stream], s["fps"], unit)) if f is not None]
        else:
            unit = 1
            def featurise(s):
                return list(landmark_features(s["landmarks"])) if stream == "landmarks" else list(second_features(s[stream], s["fps"]))
        x_train, y_train = [], []
        for s in train:
            rows = featurise(s)
            x_train += rows
            y_train += [label[s["person"]]] * len(rows)
        x_train, y_train = np.array(x_train), np.array(y_train)
        scaler = StandardScaler().fit(x_train)
        if attacker == "neighbour":
            reference = scaler.transform(x_train)
        elif attacker == "logistic":
            model = LogisticRegression(C=1.0, max_iter=300 if quick else 1000).fit(scaler.transform(x_train), y_train)
        else:
            model = RandomForestClassifier(n_estimators=150 if quick else 400, min_samples_leaf=2, n_jobs=-1,
                                           random_state=19).fit(x_train, y_train)
        for s in test:
            rows = np.array(featurise(s))
            if len(rows) == 0:
                continue
            if attacker == "neighbour":
                z = scaler.transform(rows)
                distances = (z ** 2).sum(1)[:, None] + (reference ** 2).sum(1)[None, :] - 2 * z @ reference.T
                votes = np.zeros((len(rows), len(people)))
                votes[np.arange(len(rows)), y_train[np.argmin(distances, 1)]] = 1
                evidence = votes
            else:
                proba = model.predict_proba(scaler.transform(rows) if attacker == "logistic" else rows)
                evidence = np.full((len(rows), len(people)), -30.0)
                evidence[:, model.classes_] = np.log(np.clip(proba, 1e-12, 1))
            lengths = [1, 10, 60, "whole"] if unit == 1 else [10, 60, "whole"]
            for length, predictions in summed_predictions(evidence, lengths, unit).items():
                for p in predictions:
                    scores.add(length, s["role"], p == label[s["person"]])
    return scores


# --- expression -----------------------------------------------------------------------------------

def intervals(mask):
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.where(edges == 1)[0], np.where(edges == -1)[0]))


def recall_precision(truth_mask, shown_mask, slack, truth_any=None):
    """Event recall (scripted events the stream shows at some frame within slack) and precision
    (events the stream shows that overlap a scripted one, or one of truth_any, within slack)."""
    scripted, shown = intervals(truth_mask), intervals(shown_mask)
    anything = scripted if truth_any is None else intervals(truth_any)
    def overlaps(a, b):
        return a[0] - slack < b[1] and b[0] - slack < a[1]
    recall = [any(overlaps(t, s) for s in shown) for t in scripted]
    precision = [any(overlaps(s, t) for t in anything) for s in shown]
    return recall, precision


def split_by_length(mask, frames):
    """The runs of mask shorter than frames, and the others."""
    short, long = np.zeros_like(mask), np.zeros_like(mask)
    for a, b in intervals(mask):
        (short if b - a < frames else long)[a:b] = True
    return short, long


# Per action class: what the script did (truth) and what a stream shows for it. Speech mouth
# shapes are the rounded syllables (lips rounded for less than half a second), puckers the ones
# held longer; both are shown by the pucker or funnel coefficients, so each one's precision counts
# shown events that overlap either.
CLASSES = ["speech mouth shapes", "jaw (syllables)", "smile", "brow raise", "frown", "pucker (held)", "blink", "wink",
           "nod (≥ 4°)", "turn (≥ 5°)", "glance (≥ 8°)"]


def expression_table(sessions, stream):
    """Per action class: recall and precision of the stream against the script; the jaw's correlation."""
    totals = {}
    jaw_r = []
    for s in sessions:
        truth, frames, fps = s["truth"], s[stream], s["fps"]
        tracked = frames[:, TRACKED] > 0.5
        f = np.nan_to_num(frames)
        blink_l, blink_r = truth[:, T["blinkLeft"]] > 0.5, truth[:, T["blinkRight"]] > 0.5
        shown_l, shown_r = f[:, I["eyeBlinkLeft"]] > 0.5, f[:, I["eyeBlinkRight"]] > 0.5
        rounded = truth[:, T["pucker"]] > 0.3
        speech_round, held_round = split_by_length(rounded, fps // 2)
        shown_round = np.maximum(f[:, I["mouthPucker"]], f[:, I["mouthFunnel"]]) > 0.15
        classes = {
            "speech mouth shapes": (speech_round, shown_round, rounded),
            "jaw (syllables)": (truth[:, T["jawDrop"]] > 0.06, f[:, I["jawOpen"]] > 0.15, None),
            "smile": (truth[:, T["smile"]] > 0.3, (f[:, I["mouthSmileLeft"]] + f[:, I["mouthSmileRight"]]) / 2 > 0.2, None),
            "brow raise": (truth[:, T["browRaise"]] > 0.3, f[:, I["browInnerUp"]] > 0.2, None),
            "frown": (truth[:, T["frown"]] > 0.3, (f[:, I["mouthFrownLeft"]] + f[:, I["mouthFrownRight"]]) / 2 > 0.15, None),
            "pucker (held)": (held_round, shown_round, rounded),
            "blink": (blink_l & blink_r, shown_l & shown_r, None),
            "wink": ((blink_l ^ blink_r), (shown_l & (f[:, I["eyeBlinkRight"]] < 0.2)) | (shown_r & (f[:, I["eyeBlinkLeft"]] < 0.2)), None),
            "nod (≥ 4°)": (np.abs(truth[:, T["headPitch"]]) >= 4, np.abs(f[:, PITCH]) >= 2.5, None),
            "turn (≥ 5°)": (np.abs(truth[:, T["headYaw"]]) >= 5, np.abs(f[:, YAW]) >= 3, None),
            "glance (≥ 8°)": (np.abs(truth[:, T["gazeYaw"]]) >= 8, np.abs(f[:, GX]) >= 0.06, None),
        }
        for name, (scripted, shown, anything) in classes.items():
            recall, precision = recall_precision(scripted & tracked, shown & tracked, int(0.3 * fps),
                                                 None if anything is None else anything & tracked)
            entry = totals.setdefault(name, [0, 0, 0, 0])
            entry[0] += sum(recall); entry[1] += len(recall); entry[2] += sum(precision); entry[3] += len(precision)
        jaw = truth[:, T["jawDrop"]]
        ok = tracked & np.isfinite(frames[:, I["jawOpen"]])
        if ok.sum() > 10 and np.std(jaw[ok]) > 0 and np.std(frames[ok, I["jawOpen"]]) > 0:
            jaw_r.append(float(np.corrcoef(jaw[ok], frames[ok, I["jawOpen"]])[0, 1]))
    table = {name: {"recall": e[0] / e[1] if e[1] else None, "precision": e[2] / e[3] if e[3] else None,
                    "scripted": e[1], "shown": e[3]} for name, e in totals.items()}
    table["jaw correlation"] = float(np.median(jaw_r)) if jaw_r else None
    return table


# --- report ---------------------------------------------------------------------------------------

NAMES = {"landmarks": "raw landmarks", "off": "off (--privacy off)", "standard": "standard (--privacy standard)",
         "strict": "strict (--privacy strict)"}


def option(args, name, default):
    return args[args.index(name) + 1].split(",") if name in args else default


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if args else 2)
    directory = args[0]
    quick = "--quick" in args
    out_json = args[args.index("--json") + 1] if "--json" in args else None
    sessions = load(directory)
    if "--tuned-only" in args:
        sessions = [s for s in sessions if s["role"] == "tuned"]
    streams = option(args, "--streams", ["landmarks"] + STREAMS)
    attackers = option(args, "--attackers", ["neighbour", "logistic", "forest"])
    unknown = set(streams) - set(["landmarks"] + STREAMS) | set(attackers) - {"neighbour", "logistic", "forest"}
    if unknown:
        sys.exit(f"attack.py: no such stream or attacker: {', '.join(sorted(unknown))}")
    people = sorted({s["person"] for s in sessions})
    roles = sorted({s["role"] for s in sessions}, key=lambda r: r != "heldout")
    chance = 1 / len(people)
    print(f"{len(people)} people ({sum(1 for p in people if any(s['person'] == p and s['role'] == 'heldout' for s in sessions))} held out), "
          f"{len(sessions)} sessions of {len(sessions[0][STREAMS[0]]) / sessions[0]['fps']:.0f} s after warm-up; chance {100 * chance:.1f} %",
          file=sys.stderr)
    report = {"people": len(people), "sessions": len(sessions), "chance": chance, "default": STREAMS[0], "rows": [], "expression": {}}
    for stream in streams:
        for attacker in attackers:
            print(f"  {stream}: {attacker}…", file=sys.stderr)
            scores = evaluate(sessions, stream, attacker, quick)
            for role in roles:
                row = {"stream": stream, "attacker": attacker, "role": role, "cells": {}}
                for length in (1, 10, 60, "whole"):
                    correct, total = scores.get(length, role)
                    if total:
                        row["cells"][str(length)] = {"correct": correct, "total": total, "accuracy": correct / total,
                                                     "bound": bound(chance, total)}
                report["rows"].append(row)
        if stream != "landmarks":
            report["expression"][stream] = expression_table(sessions, stream)
    names = dict(NAMES)
    names[STREAMS[0]] += ", the default"
    order = {name: k for k, name in enumerate(["landmarks", "off", "standard", "strict"])}
    print(f"\n| stream | attacker | people | 1 s | 10 s | 60 s | whole session |\n|---|---|---|---|---|---|---|")
    for row in sorted(report["rows"], key=lambda r: (r["role"] != "heldout", order.get(r["stream"], 9), r["attacker"])):
        cells = []
        for length in ("1", "10", "60", "whole"):
            c = row["cells"].get(length)
            cells.append("–" if c is None else f"{100 * c['accuracy']:.1f} % ({c['correct']}/{c['total']}; bound {100 * c['bound']:.1f} %)")
        print(f"| {names[row['stream']]} | {row['attacker']} | {row['role']} | " + " | ".join(cells) + " |")
    print(f"\nchance: {100 * chance:.1f} % (1 of {len(people)} people)")
    if report["expression"]:
        print("\n| stream | " + " | ".join(CLASSES + ["jaw correlation"]) + " |")
        print("|---|" + "---|" * (len(CLASSES) + 1))
        for stream, table in sorted(report["expression"].items(), key=lambda item: order.get(item[0], 9)):
            cells = []
            for name in CLASSES:
                r, p = table[name]["recall"], table[name]["precision"]
                cells.append(f"recall {'–' if r is None else f'{r:.2f}'}, precision {'–' if p is None else f'{p:.2f}'}")
            value = table["jaw correlation"]
            cells.append("–" if value is None else f"r = {value:.2f}")
            print(f"| {names[stream]} | " + " | ".join(cells) + " |")
    if out_json:
        with open(out_json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
