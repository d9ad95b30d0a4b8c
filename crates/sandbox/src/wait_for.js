// `waitFor(condition, {timeout, interval})`, by the codemode contract. Evaluated
// once per context before the program, with the real `sleep` and `Date.now`
// captured, so a program that replaces either cannot change how it waits.
(function (sleep, now) {
  "use strict";
  const MAX_TIMEOUT = 30000;
  const MIN_INTERVAL = 250;
  return async function waitFor(condition, options) {
    if (typeof condition !== "function") {
      throw new TypeError("waitFor(condition, {timeout, interval}) needs a function as its condition");
    }
    const timeout = options?.timeout ?? MAX_TIMEOUT;
    const interval = options?.interval ?? 500;
    if (!Number.isInteger(timeout) || timeout < 0 || timeout > MAX_TIMEOUT) {
      throw new RangeError(
        `waitFor timeout must be an integer number of milliseconds from 0 to ${MAX_TIMEOUT}; got ${String(timeout)}`,
      );
    }
    if (typeof interval !== "number" || !Number.isFinite(interval) || interval < 0) {
      throw new RangeError(`waitFor interval must be a finite number of milliseconds; got ${String(interval)}`);
    }
    const step = Math.max(Math.round(interval), MIN_INTERVAL);
    const started = now();
    let slept = 0;
    let attempts = 0;
    for (;;) {
      attempts += 1;
      const value = await condition();
      if (value) {
        return value;
      }
      const elapsed = Math.max(now() - started, slept);
      if (elapsed >= timeout) {
        const error = new Error(
          `waitFor timed out after ${timeout} ms: the condition was still falsy after ${attempts} attempts`,
        );
        error.code = "wait_timeout";
        throw error;
      }
      const pause = Math.min(step, timeout - elapsed);
      await sleep(pause);
      slept += pause;
    }
  };
})
