// Voice-driven avatar expressions: the browser's port of Veil's VoiceExpressionGenerator
// (Sources/VeilCore/VoiceExpression.swift). The algorithm is specified in docs/expression.md,
// "Voice-driven expressions"; for the same levels, times and seed both give the same expression.

// Positions in the 52 ARKit coefficients (Veil's BlendShape raw order, as in wire.js).
const EYE_BLINK_LEFT = 0;
const EYE_BLINK_RIGHT = 7;
const JAW_OPEN = 17;
const MOUTH_FUNNEL = 19;
const BROW_INNER_UP = 43;
const BROW_OUTER_UP_LEFT = 44;
const BROW_OUTER_UP_RIGHT = 45;
const COEFFICIENT_COUNT = 52;

const MASK64 = (1n << 64n) - 1n;

/** SplitMix64, bit for bit as Veil's Swift SplitMix64. */
class SplitMix64 {
  constructor(seed) {
    this.state = BigInt.asUintN(64, BigInt(seed));
  }

  next() {
    this.state = (this.state + 0x9E3779B97F4A7C15n) & MASK64;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xBF58476D1CE4E5B9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94D049BB133111EBn) & MASK64;
    return z ^ (z >> 31n);
  }

  /** Uniform in [0, 1) from the top 53 bits. */
  uniform() {
    return Number(this.next() >> 11n) / 9007199254740992;
  }
}

function approach(value, target, dt, tau) {
  return value + (target - value) * (1 - Math.exp(-dt / tau));
}

function smoothstep(x) {
  const c = Math.min(Math.max(x, 0), 1);
  return c * c * (3 - 2 * c);
}

function clamp01(x) {
  return Number.isNaN(x) ? 0 : Math.min(Math.max(x, 0), 1);
}

export const MAXIMUM_JAW_OPEN = 0.6;
export const BLINK_DURATION = 0.15;
const HEAD_AMPLITUDE = { yaw: 3.0, pitch: 2.0, roll: 1.5 };

function blinkShape(p) {
  if (p < 0 || p >= BLINK_DURATION) return 0;
  if (p < 0.05) return smoothstep(p / 0.05);
  if (p < 0.09) return 1;
  return smoothstep((BLINK_DURATION - p) / 0.06);
}

/**
 * An avatar expression made from the voice alone: mouth from speech energy, natural blinks, small
 * idle head motion, brows on emphasis. `update(level, timeSeconds, muted)` takes the speech RMS
 * (samples in -1…1) at a time in seconds (any origin, increasing), and whether the voice was muted
 * there (the mouth then closes at once), and returns
 * `{ coefficients: Float32Array(52), headPose: { yaw, pitch, roll } (degrees), gaze: null }`,
 * the expression shape wire.js encodes. Frames made from it are sent with isVoiceDriven = true.
 */
export class VoiceExpression {
  constructor({ seed = 1 } = {}) {
    this.random = new SplitMix64(seed);
    this.started = false;
    this.startTime = 0;
    this.lastTime = 0;
    this.floor = -50;
    this.peak = -20;
    this.envelope = 0;
    this.average = 0;
    this.brow = 0;
    this.blinkStart = 0;
    this.head = [];
    this.funnelPhase = 0;
  }

  update(level, timeSeconds, muted = false) {
    if (!this.started) {
      this.started = true;
      this.startTime = timeSeconds;
      this.lastTime = timeSeconds;
      for (let axis = 0; axis < 3; axis++) {
        const f1 = 0.05 + 0.10 * this.random.uniform();
        const p1 = 2 * Math.PI * this.random.uniform();
        const f2 = 0.13 + 0.12 * this.random.uniform();
        const p2 = 2 * Math.PI * this.random.uniform();
        this.head.push({ f1, p1, f2, p2 });
      }
      this.funnelPhase = 2 * Math.PI * this.random.uniform();
      this.blinkStart = 0.8 + 2.5 * this.random.uniform();
    }
    const dt = Math.min(Math.max(timeSeconds - this.lastTime, 0), 0.5);
    this.lastTime = Math.max(timeSeconds, this.lastTime);
    const t = this.lastTime - this.startTime;

    let activity = 0;
    if (muted) {
      // Muted: the mouth closes at once, and the muted silence is not learnt as the noise floor.
      this.envelope = 0;
    } else {
      const safeLevel = Number.isFinite(level) ? level : 0;
      const db = 20 * Math.log10(Math.max(Math.abs(safeLevel), 1e-5));
      this.floor = approach(this.floor, db, dt, db < this.floor ? 0.3 : 6);
      this.floor = Math.max(this.floor, -90);
      this.peak = approach(this.peak, db, dt, db > this.peak ? 0.05 : 3);
      // Speech is read over the 24 dB below the peak, and not within 6 dB of the floor.
      const low = Math.max(this.floor + 6, this.peak - 24);
      activity = Math.min(Math.max((db - low) / Math.max(this.peak - low, 12), 0), 1);
      if (db < -70) activity = 0;
      this.envelope = approach(this.envelope, activity, dt, activity > this.envelope ? 0.03 : 0.09);
    }
    this.average = approach(this.average, activity, dt, 1.5);
    const emphasis = Math.min(Math.max((activity - this.average - 0.35) / 0.3, 0), 1);
    this.brow = approach(this.brow, emphasis, dt, emphasis > this.brow ? 0.08 : 0.4);

    while (t - this.blinkStart >= BLINK_DURATION) this.blinkStart += 2 + 4 * this.random.uniform();
    const blink = blinkShape(t - this.blinkStart);

    const sway = (axis) => {
      const a = this.head[axis];
      return 0.6 * Math.sin(2 * Math.PI * a.f1 * t + a.p1) + 0.4 * Math.sin(2 * Math.PI * a.f2 * t + a.p2);
    };
    const coefficients = new Float32Array(COEFFICIENT_COUNT);
    coefficients[JAW_OPEN] = clamp01(MAXIMUM_JAW_OPEN * this.envelope);
    coefficients[MOUTH_FUNNEL] = clamp01(0.25 * this.envelope * (0.5 + 0.5 * Math.sin(2 * Math.PI * 0.9 * t + this.funnelPhase)));
    coefficients[EYE_BLINK_LEFT] = clamp01(blink);
    coefficients[EYE_BLINK_RIGHT] = clamp01(blink);
    coefficients[BROW_INNER_UP] = clamp01(0.4 * this.brow);
    coefficients[BROW_OUTER_UP_LEFT] = clamp01(0.3 * this.brow);
    coefficients[BROW_OUTER_UP_RIGHT] = clamp01(0.3 * this.brow);
    return {
      coefficients,
      headPose: {
        yaw: Math.fround(HEAD_AMPLITUDE.yaw * sway(0)),
        pitch: Math.fround(HEAD_AMPLITUDE.pitch * sway(1) + 1.5 * this.brow),
        roll: Math.fround(HEAD_AMPLITUDE.roll * sway(2)),
      },
      gaze: null,
    };
  }
}

/**
 * The speech level of a microphone stream: a Web Audio AnalyserNode on it, read as the RMS of its
 * latest 1024 samples (about 21 ms) whenever `read()` is called (once per animation frame).
 * Nothing is played: the analyser is not connected to the context's destination.
 */
export class MicrophoneLevel {
  constructor(stream, { audioContext = null, fftSize = 1024 } = {}) {
    this.ownsContext = !audioContext;
    this.context = audioContext ?? new AudioContext();
    this.source = this.context.createMediaStreamSource(stream);
    this.analyser = this.context.createAnalyser();
    this.analyser.fftSize = fftSize;
    this.source.connect(this.analyser);
    this.samples = new Float32Array(this.analyser.fftSize);
  }

  /** RMS of the latest samples, 0…1 (0 for silence). */
  read() {
    this.analyser.getFloatTimeDomainData(this.samples);
    let sum = 0;
    for (const s of this.samples) sum += s * s;
    return Math.sqrt(sum / this.samples.length);
  }

  /** The audio clock in seconds (the time the samples just read belong to). */
  get time() {
    return this.context.currentTime;
  }

  /** Disconnects the analyser (and closes the audio context if this helper made it). */
  close() {
    this.source.disconnect();
    if (this.ownsContext) this.context.close();
  }
}
