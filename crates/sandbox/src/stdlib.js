// The guest's standard library beside ECMAScript (see `stdlib.rs`): bytes,
// text, crypto, URL query strings, `structuredClone`'s depth bound and
// `parallelMap`. Evaluated the first time a program touches one of them, and
// called with the native helpers and the engine's own classes (`raw`), which
// no global names; it answers the library, which the global accessors serve.
// The built-ins it uses are captured as it loads, and the natives check each
// limit again themselves, so nothing a program replaces routes around one.
(function (native, raw) {
  "use strict";
  const MAX_TEXT = native.maxText;
  const MAX_BYTES = native.maxBytes;
  const MAX_RANDOM = 65536;
  const MAX_DEPTH = native.maxDepth;
  const MAX_CONCURRENCY = 32;
  const lib = {};
  const { defineProperty, freeze, getOwnPropertyDescriptor, keys: ownKeys } = Object;
  const { apply } = Reflect;
  const isArray = Array.isArray;
  const from = Array.from;
  const { isInteger } = Number;
  const { min } = Math;
  const text = String;
  const upper = String.prototype.toUpperCase;
  const replaceText = String.prototype.replace;
  const startsWith = String.prototype.startsWith;
  const sliceText = String.prototype.slice;
  const NotOfType = TypeError;
  const OutOfRange = RangeError;
  const Bytes = Uint8Array;
  const Buffer = ArrayBuffer;
  const isView = ArrayBuffer.isView;
  const Pairs = Map;
  const Seen = Set;
  const seenHas = Set.prototype.has;
  const seenAdd = Set.prototype.add;
  const mapForEach = Map.prototype.forEach;
  const setForEach = Set.prototype.forEach;
  const push = Array.prototype.push;
  const pop = Array.prototype.pop;
  const all = Promise.all.bind(Promise);
  const iterator = Symbol.iterator;
  const toStringTag = Symbol.toStringTag;
  const typedKind = getOwnPropertyDescriptor(
    Object.getPrototypeOf(Uint8Array.prototype),
    toStringTag,
  ).get;
  const { TextEncoder, TextDecoder, atob, btoa } = raw;
  const encoder = new TextEncoder();
  const encode = TextEncoder.prototype.encode;
  const decode = TextDecoder.prototype.decode;
  const clone = raw.structuredClone;
  const NativeURL = raw.URL;
  lib.TextEncoder = TextEncoder;
  lib.TextDecoder = TextDecoder;
  lib.URL = NativeURL;
  lib.format = freeze(raw.format);

  // Defines `name` on `object` as a method that is not enumerable, as the
  // platform's are.
  function method(object, name, fn) {
    defineProperty(fn, "name", { value: name, configurable: true });
    defineProperty(object, name, { value: fn, writable: true, configurable: true });
  }

  function tooLong(what, size, limit, unit) {
    return new OutOfRange(`${what} is ${size} ${unit}, more than the ${limit} ${unit} one call may take`);
  }

  function checkText(what, value) {
    const string = text(value);
    if (string.length > MAX_TEXT) throw tooLong(what, string.length, MAX_TEXT, "characters");
    return string;
  }

  // A `Uint8Array` over `data`'s bytes (no copy): a string is its UTF-8.
  function bytesOf(what, data, strings) {
    let bytes;
    if (typeof data === "string" && strings) {
      bytes = apply(encode, encoder, [checkText(what, data)]);
    } else if (data instanceof Buffer) {
      bytes = new Bytes(data);
    } else if (isView(data)) {
      bytes = new Bytes(data.buffer, data.byteOffset, data.byteLength);
    } else {
      throw new NotOfType(
        `${what} must be ${strings ? "a string or " : ""}bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer); got ${describe(data)}`,
      );
    }
    if (bytes.length > MAX_BYTES) throw tooLong(what, bytes.length, MAX_BYTES, "bytes");
    return bytes;
  }

  function describe(value) {
    if (value === null) return "null";
    if (isArray(value)) return "an array";
    return typeof value === "object" ? "an object" : `a ${typeof value}`;
  }

  // Text and bytes: the platform's classes, bounded per call.
  method(TextEncoder.prototype, "encode", function encodeText(input = "") {
    return apply(encode, this, [checkText("the text to encode", input)]);
  });
  method(TextDecoder.prototype, "decode", function decodeBytes(input, options) {
    if (input === undefined) return "";
    return apply(decode, this, [bytesOf("the bytes to decode", input, false), options]);
  });
  // The engine's `atob` and `btoa` throw a bare string; a program gets an
  // Error named as the platform's would be.
  const Failure = Error;
  const PREFIX = "InvalidCharacterError: ";
  function invalidCharacter(thrown) {
    if (typeof thrown !== "string") return thrown;
    const message = apply(startsWith, thrown, [PREFIX]) ? apply(sliceText, thrown, [PREFIX.length]) : thrown;
    const error = new Failure(message);
    defineProperty(error, "name", { value: "InvalidCharacterError", writable: true, configurable: true });
    return error;
  }
  method(lib, "atob", function atobBounded(data) {
    const input = checkText("the Base64 text", data);
    try {
      return atob(input);
    } catch (thrown) {
      throw invalidCharacter(thrown);
    }
  });
  method(lib, "btoa", function btoaBounded(data) {
    const input = checkText("the text to encode", data);
    try {
      return btoa(input);
    } catch (thrown) {
      throw invalidCharacter(thrown);
    }
  });

  function alphabetOf(options) {
    const alphabet = options?.alphabet ?? "base64";
    if (alphabet !== "base64" && alphabet !== "base64url") {
      throw new NotOfType(`alphabet must be "base64" or "base64url"; got ${text(alphabet)}`);
    }
    return alphabet === "base64url";
  }

  method(lib, "toBase64", function toBase64(bytes, options) {
    return native.toBase64(bytesOf("toBase64's bytes", bytes, false), alphabetOf(options), !!options?.omitPadding);
  });
  method(lib, "fromBase64", function fromBase64(data, options) {
    if (typeof data !== "string") throw new NotOfType(`fromBase64 takes a string; got ${describe(data)}`);
    return native.fromBase64(checkText("fromBase64's text", data), alphabetOf(options));
  });
  method(lib, "toHex", function toHex(bytes) {
    return native.toHex(bytesOf("toHex's bytes", bytes, false));
  });
  method(lib, "fromHex", function fromHex(data) {
    if (typeof data !== "string") throw new NotOfType(`fromHex takes a string; got ${describe(data)}`);
    return native.fromHex(checkText("fromHex's text", data));
  });

  // `crypto`: randomness, digests and HMACs; `subtle.digest` for programs
  // written for the browser's WebCrypto.
  function algorithmOf(algorithm) {
    const name = typeof algorithm === "object" && algorithm !== null ? algorithm.name : algorithm;
    const key = apply(replaceText, apply(upper, text(name), []), ["-", ""]);
    if (key === "SHA1" || key === "SHA256" || key === "SHA384" || key === "SHA512") return key;
    throw new NotOfType(`the algorithm must be one of "SHA-1", "SHA-256", "SHA-384", "SHA-512"; got ${text(name)}`);
  }
  const crypto = {};
  method(crypto, "randomUUID", function randomUUID() {
    return native.randomUUID();
  });
  method(crypto, "getRandomValues", function getRandomValues(array) {
    const kind = isView(array) ? apply(typedKind, array, []) : undefined;
    if (kind === undefined || kind === "Float32Array" || kind === "Float64Array") {
      throw new NotOfType("getRandomValues takes an integer typed array (Uint8Array, Int32Array, …)");
    }
    if (array.byteLength > MAX_RANDOM) {
      throw new OutOfRange(
        `getRandomValues fills at most ${MAX_RANDOM} bytes a call; this array has ${array.byteLength}`,
      );
    }
    native.fill(new Bytes(array.buffer, array.byteOffset, array.byteLength));
    return array;
  });
  method(crypto, "digest", function digest(algorithm, data) {
    return native.digest(algorithmOf(algorithm), bytesOf("the data to digest", data, true));
  });
  method(crypto, "hmac", function hmac(algorithm, key, data) {
    const name = algorithmOf(algorithm);
    return native.hmac(name, bytesOf("the HMAC key", key, true), bytesOf("the data to sign", data, true));
  });
  const subtle = {};
  method(subtle, "digest", async function digest(algorithm, data) {
    return native.digest(algorithmOf(algorithm), bytesOf("the data to digest", data, true)).buffer;
  });
  defineProperty(crypto, "subtle", { value: freeze(subtle) });
  lib.crypto = freeze(crypto);

  // `URLSearchParams` (WHATWG), its pairs parsed and written by the `url`
  // crate's form encoding, and `URL.prototype.searchParams` over it.
  const linked = new WeakMap();
  const linkedGet = WeakMap.prototype.get;
  const linkedSet = WeakMap.prototype.set;
  const searchOf = getOwnPropertyDescriptor(NativeURL.prototype, "search");
  class URLSearchParams {
    #pairs;
    constructor(init = "") {
      this.#pairs = [];
      if (init instanceof URLSearchParams) {
        this.#pairs = from(init.#pairs, (pair) => [pair[0], pair[1]]);
      } else if (typeof init === "object" && init !== null) {
        if (typeof init[iterator] === "function") {
          for (const pair of init) {
            const entry = from(pair);
            if (entry.length !== 2) {
              throw new NotOfType(`URLSearchParams takes pairs of [name, value]; one has ${entry.length} items`);
            }
            apply(push, this.#pairs, [[text(entry[0]), text(entry[1])]]);
          }
        } else {
          for (const name of ownKeys(init)) apply(push, this.#pairs, [[name, text(init[name])]]);
        }
      } else {
        let query = checkText("the query", init);
        if (apply(startsWith, query, ["?"])) query = apply(sliceText, query, [1]);
        this.#pairs = native.parseQuery(query);
      }
    }
    #changed() {
      const url = apply(linkedGet, linked, [this]);
      if (url !== undefined) apply(searchOf.set, url, [native.writeQuery(this.#pairs)]);
    }
    static attach(params, url) {
      params.#pairs = native.parseQuery(apply(sliceText, apply(searchOf.get, url, []), [1]));
      apply(linkedSet, linked, [params, url]);
      return params;
    }
    get size() {
      return this.#pairs.length;
    }
    append(name, value) {
      apply(push, this.#pairs, [[text(name), text(value)]]);
      this.#changed();
    }
    delete(name, value) {
      const key = text(name);
      this.#pairs = this.#pairs.filter((pair) => pair[0] !== key || (value !== undefined && pair[1] !== text(value)));
      this.#changed();
    }
    get(name) {
      const key = text(name);
      const found = this.#pairs.find((pair) => pair[0] === key);
      return found === undefined ? null : found[1];
    }
    getAll(name) {
      const key = text(name);
      return this.#pairs.filter((pair) => pair[0] === key).map((pair) => pair[1]);
    }
    has(name, value) {
      const key = text(name);
      return this.#pairs.some((pair) => pair[0] === key && (value === undefined || pair[1] === text(value)));
    }
    set(name, value) {
      const key = text(name);
      const at = this.#pairs.findIndex((pair) => pair[0] === key);
      if (at < 0) {
        apply(push, this.#pairs, [[key, text(value)]]);
      } else {
        this.#pairs[at] = [key, text(value)];
        this.#pairs = this.#pairs.filter((pair, index) => index <= at || pair[0] !== key);
      }
      this.#changed();
    }
    sort() {
      // Stable, by UTF-16 code units, as the standard says.
      this.#pairs = this.#pairs
        .map((pair, index) => [pair, index])
        .sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1]))
        .map((entry) => entry[0]);
      this.#changed();
    }
    forEach(callback, thisArg) {
      for (const pair of from(this.#pairs)) apply(callback, thisArg, [pair[1], pair[0], this]);
    }
    *entries() {
      for (const pair of from(this.#pairs)) yield [pair[0], pair[1]];
    }
    *keys() {
      for (const pair of from(this.#pairs)) yield pair[0];
    }
    *values() {
      for (const pair of from(this.#pairs)) yield pair[1];
    }
    [iterator]() {
      return this.entries();
    }
    toString() {
      return native.writeQuery(this.#pairs);
    }
    get [toStringTag]() {
      return "URLSearchParams";
    }
  }
  const attach = URLSearchParams.attach;
  delete URLSearchParams.attach;
  method(lib, "URLSearchParams", URLSearchParams);
  defineProperty(NativeURL.prototype, "searchParams", {
    get() {
      return attach(new URLSearchParams(), this);
    },
    configurable: true,
  });
  defineProperty(NativeURL.prototype, toStringTag, { value: "URL", configurable: true });

  // `structuredClone`: the engine's clone recurses on the host stack, so a
  // value is walked first (without recursion) and refused past the depth
  // every value leaving a run keeps.
  function checkDepth(root) {
    const seen = new Seen();
    const stack = [[root, 1]];
    while (stack.length > 0) {
      const [value, depth] = apply(pop, stack, []);
      if (typeof value !== "object" || value === null || apply(seenHas, seen, [value])) continue;
      if (depth > MAX_DEPTH) {
        throw new OutOfRange(
          `structuredClone: the value nests deeper than ${MAX_DEPTH} levels, the most a value in a run may`,
        );
      }
      apply(seenAdd, seen, [value]);
      const next = (child) => apply(push, stack, [[child, depth + 1]]);
      if (value instanceof Pairs) {
        apply(mapForEach, value, [(child, key) => (next(key), next(child))]);
      } else if (value instanceof Seen) {
        apply(setForEach, value, [next]);
      } else if (!isView(value)) {
        for (const key of ownKeys(value)) next(value[key]);
      }
    }
  }
  method(lib, "structuredClone", function structuredClone(value, options) {
    checkDepth(value);
    return clone(value, options);
  });

  // `parallelMap(items, fn, concurrency)`: at most `concurrency` calls of
  // `fn` at once (5 unless given, never more than 32), the results in the
  // items' order; rejects with the first failure.
  method(lib, "parallelMap", async function parallelMap(items, fn, concurrency = 5) {
    if (typeof fn !== "function") {
      throw new NotOfType("parallelMap(items, fn, concurrency?) needs a function as `fn`");
    }
    if (!isInteger(concurrency) || concurrency < 1) {
      throw new OutOfRange(`parallelMap's concurrency must be an integer from 1 to ${MAX_CONCURRENCY}; got ${text(concurrency)}`);
    }
    const list = from(items);
    const results = new Array(list.length);
    let next = 0;
    let failed = false;
    const lane = async () => {
      while (!failed && next < list.length) {
        const index = next++;
        try {
          results[index] = await fn(list[index], index);
        } catch (error) {
          failed = true;
          throw error;
        }
      }
    };
    const lanes = [];
    const width = min(concurrency, MAX_CONCURRENCY, list.length);
    for (let started = 0; started < width; started++) apply(push, lanes, [lane()]);
    await all(lanes);
    return results;
  });
  return lib;
});
