// The audio thread's side of FrameClock (frame-clock.js): counts the samples of the audio clock
// and, every sampleRate / framesPerSecond of them, posts a tick with the RMS of the microphone's
// latest 1024 samples (about 21 ms at 48 kHz). It runs on the audio rendering thread, which
// browsers do not throttle in background tabs, so the ticks keep their rate whatever the page's
// main thread is doing. It outputs nothing.

const WINDOW = 1024; // a power of two: the ring index wraps with a mask

class FrameClockProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const framesPerSecond = options?.processorOptions?.framesPerSecond || 30;
    this.period = sampleRate / framesPerSecond;
    this.due = this.period;
    this.ring = new Float32Array(WINDOW);
    this.index = 0;
    this.port.onmessage = (event) => { if (event.data === 'stop') this.stopped = true; };
  }

  process(inputs) {
    if (this.stopped) return false;
    // One channel (the node downmixes the microphone); no input connected reads as silence.
    const samples = inputs[0]?.[0];
    const length = samples ? samples.length : 128;
    for (let i = 0; i < length; i++) {
      this.ring[this.index] = samples ? samples[i] : 0;
      this.index = (this.index + 1) & (WINDOW - 1);
    }
    this.due -= length;
    if (this.due <= 0) {
      this.due += this.period;
      if (this.due <= 0) this.due = this.period; // fell behind by more than a period: skip, do not burst
      let sum = 0;
      for (let i = 0; i < WINDOW; i++) sum += this.ring[i] * this.ring[i];
      // The audio clock at the end of this block, in seconds, and the level of the window ending there.
      this.port.postMessage({ time: (currentFrame + length) / sampleRate, rms: Math.sqrt(sum / WINDOW) });
    }
    return true;
  }
}

registerProcessor('veil-frame-clock', FrameClockProcessor);
