// The page's real-time clock: 30 ticks a second, each with the microphone's speech level and the
// moment it describes. Browsers throttle a page's own timers (setInterval, setTimeout) to about
// once a second in a background tab and under load, which would freeze this participant's avatar
// for everyone else; the ticks come from clocks they do not throttle instead:
//
// - the audio clock: an AudioWorklet (frame-clock-worklet.js) on the microphone counts samples on
//   the audio rendering thread and posts a tick every sampleRate / 30 of them, with the RMS of the
//   latest 1024 samples;
// - while no audio tick has come for 2.5 periods (no AudioWorklet outside a secure context, a
//   suspended audio context, a worklet still loading), a dedicated worker's timer
//   (frame-clock-worker.js), with the level read at the tick (voice.js's MicrophoneLevel).
//
// A tick's `captureMillis` is on the page's performance.now() clock: for audio ticks, the audio
// clock at the middle of the level's window mapped onto it by the fastest delivery seen (so main-
// thread delays do not jitter the stamps); for worker ticks, the worker's wall-clock time.

import { MicrophoneLevel } from './voice.js';

const WINDOW = 1024;
/** Slow re-learning of the audio-to-page offset (per tick), for drift between the two clocks. */
const OFFSET_CREEP = 0.002;

export class FrameClock {
  /**
   * `audioContext`: the page's (the microphone's) context. `onTick({ level, captureMillis, source })`
   * is called on the main thread about `framesPerSecond` times a second once `start()` is called;
   * `source` is 'audio' or 'worker'.
   */
  constructor({ audioContext, framesPerSecond = 30, onTick }) {
    this.context = audioContext;
    this.framesPerSecond = framesPerSecond;
    this.period = 1000 / framesPerSecond;
    this.onTick = onTick;
    this.node = null;
    this.worker = null;
    this.input = null;
    /** The level read on the main thread, for worker ticks (the worklet measures its own). */
    this.level = null;
    this.offset = null;
    this.lastAudioTick = -Infinity;
    this.running = false;
    /** Ticks delivered, by source: what tests and the curious can read. */
    this.ticks = { audio: 0, worker: 0 };
  }

  /** Starts ticking: at once from the worker, from the audio clock as soon as it runs. */
  start() {
    if (this.running) return;
    this.running = true;
    try {
      this.worker = new Worker(new URL('./frame-clock-worker.js', import.meta.url));
      this.worker.onmessage = (event) => this.workerTick(event.data.wallMillis);
      this.worker.postMessage({ framesPerSecond: this.framesPerSecond });
    } catch (error) {
      console.warn('frame clock: no worker', error);
    }
    this.startAudio();
  }

  async startAudio() {
    if (!this.context.audioWorklet) return; // not a secure context: the worker ticks alone
    try {
      await this.context.audioWorklet.addModule(new URL('./frame-clock-worklet.js', import.meta.url));
      if (!this.running) return;
      this.node = new AudioWorkletNode(this.context, 'veil-frame-clock', {
        numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1], channelCount: 1,
        channelCountMode: 'explicit', channelInterpretation: 'speakers',
        processorOptions: { framesPerSecond: this.framesPerSecond },
      });
      this.node.port.onmessage = (event) => this.audioTick(event.data);
      // Its output is silence; connected so that the audio thread renders it in every browser.
      this.node.connect(this.context.destination);
      this.input?.connect(this.node);
    } catch (error) {
      console.warn('frame clock: no audio worklet', error);
      this.node = null;
    }
  }

  /** The microphone (a MediaStream with an audio track) whose level the ticks carry; null: silence. */
  listen(stream) {
    try { this.input?.disconnect(); this.level?.close(); } catch { /* already */ }
    this.input = stream ? this.context.createMediaStreamSource(stream) : null;
    this.level = stream ? new MicrophoneLevel(stream, { audioContext: this.context, fftSize: WINDOW }) : null;
    if (this.input && this.node) this.input.connect(this.node);
  }

  /** The length of the window a level is measured over (ms); a tick is stamped at its middle. */
  get windowMillis() {
    return (WINDOW / this.context.sampleRate) * 1000;
  }

  /** Which clock ticked last ('audio', 'worker'), or 'stopped'. */
  get source() {
    if (!this.running) return 'stopped';
    return performance.now() - this.lastAudioTick < 2.5 * this.period ? 'audio' : 'worker';
  }

  stop() {
    this.running = false;
    this.worker?.terminate();
    this.worker = null;
    try { this.node?.port.postMessage('stop'); this.node?.disconnect(); } catch { /* closed */ }
    try { this.input?.disconnect(); this.level?.close(); } catch { /* closed */ }
    this.node = null; this.input = null; this.level = null;
  }

  audioTick({ time, rms }) {
    if (!this.running) return;
    const now = performance.now();
    this.lastAudioTick = now;
    // The fastest delivery seen maps the audio clock onto the page's clock; slower ones only nudge it.
    const difference = now - time * 1000;
    if (this.offset === null || difference < this.offset) this.offset = difference;
    else this.offset += OFFSET_CREEP * (difference - this.offset);
    this.ticks.audio++;
    this.onTick({ level: rms, captureMillis: time * 1000 + this.offset - this.windowMillis / 2, source: 'audio' });
  }

  workerTick(wallMillis) {
    if (!this.running || performance.now() - this.lastAudioTick < 2.5 * this.period) return;
    this.ticks.worker++;
    this.onTick({ level: this.level?.read() ?? 0, captureMillis: wallMillis - performance.timeOrigin - this.windowMillis / 2, source: 'worker' });
  }
}
