//! The guest's standard library, case by case: ordinary inputs with golden
//! outputs, errors named on bad input, and inputs past each limit. Run
//! natively (`native.rs`) and in the sandbox worker's wasm (`wasm.rs`) alike.

/// Programs and the summaries their runs must give.
pub const STDLIB_CASES: &[(&str, &str)] = &[
    // Digests and HMACs, bytes out; the algorithm's spelling is forgiving.
    (
        "return toHex(crypto.digest('SHA-256', 'abc'))",
        r##"completed "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad""##,
    ),
    (
        "return [toHex(crypto.digest('sha1', 'abc')), toHex(crypto.digest({name: 'SHA-384'}, new TextEncoder().encode('abc')))]",
        r##"completed ["a9993e364706816aba3e25717850c26c9cd0d89d","cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"]"##,
    ),
    (
        "return toHex(crypto.digest('SHA512', new Uint8Array([97, 98, 99]).buffer))",
        r##"completed "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f""##,
    ),
    (
        "return toHex(crypto.hmac('SHA-256', 'key', 'The quick brown fox jumps over the lazy dog'))",
        r##"completed "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8""##,
    ),
    (
        "const b = await crypto.subtle.digest('SHA-256', new TextEncoder().encode('abc')); return [b instanceof ArrayBuffer, toHex(new Uint8Array(b)).slice(0, 8)]",
        r##"completed [true,"ba7816bf"]"##,
    ),
    (
        "try { crypto.digest('MD5', 'abc') } catch (e) { return [e.name, e.message] }",
        r##"completed ["TypeError","the algorithm must be one of \"SHA-1\", \"SHA-256\", \"SHA-384\", \"SHA-512\"; got MD5"]"##,
    ),
    (
        "try { crypto.digest('SHA-256', 42) } catch (e) { return e.message }",
        r##"completed "the data to digest must be a string or bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer); got a number""##,
    ),
    // A program that lies about its arrays' sizes before the library loads
    // still meets the limit, inside the implementation.
    (
        "Object.defineProperty(Object.getPrototypeOf(Uint8Array.prototype), 'length', {get: () => 1}); try { return toHex(new ArrayBuffer(10 * 1024 * 1024 + 1)) } catch (e) { return [e.name, e.message] }",
        r##"completed ["RangeError","the bytes are 10485761 bytes, more than the 10485760 bytes one call may take"]"##,
    ),
    // The library loads on first touch; a global written first keeps its value.
    (
        "crypto = 'mine'; return [crypto, typeof toHex, typeof globalThis.URL]",
        r##"completed ["mine","function","function"]"##,
    ),
    // Text and bytes.
    (
        "const b = new TextEncoder().encode('héllo €'); return [b.length, Array.from(b.slice(0, 3)), new TextDecoder().decode(b)]",
        r##"completed [10,[104,195,169],"héllo €"]"##,
    ),
    (
        "return [new TextDecoder().decode(new Uint8Array([0x61, 0xff, 0x62])), new TextDecoder().encoding, new TextDecoder().decode()]",
        r##"completed ["a�b","utf-8",""]"##,
    ),
    (
        "return [btoa('hello'), atob('aGVs bG8=')]",
        r##"completed ["aGVsbG8=","hello"]"##,
    ),
    (
        "const errors = []; for (const call of [() => btoa('€'), () => atob('a')]) { try { call() } catch (e) { errors.push([e instanceof Error, e.name, e.message]) } } return errors",
        r##"completed [[true,"InvalidCharacterError","The string to be encoded contains characters outside of the Latin1 range."],[true,"InvalidCharacterError","The string to be decoded is not correctly encoded."]]"##,
    ),
    (
        "const b = new Uint8Array([251, 255]); return [toBase64(b), toBase64(b, {alphabet: 'base64url', omitPadding: true}), Array.from(fromBase64('+/8=')), Array.from(fromBase64('-_8', {alphabet: 'base64url'}))]",
        r##"completed ["+/8=","-_8",[251,255],[251,255]]"##,
    ),
    (
        "try { fromBase64('@@') } catch (e) { return [e.name, e.message.startsWith('fromBase64: the text is not base64')] }",
        r##"completed ["SyntaxError",true]"##,
    ),
    (
        "return [toHex(new Uint8Array([0, 15, 255])), Array.from(fromHex('00Ff10')), toHex(new Uint16Array([1]))]",
        r##"completed ["000fff",[0,255,16],"0100"]"##,
    ),
    (
        "const errors = []; for (const text of ['abc', '0g']) { try { fromHex(text) } catch (e) { errors.push(e.message) } } return errors",
        r##"completed ["fromHex: the text has 3 characters; hex is two digits a byte","fromHex: `g` at position 1 is not a hex digit"]"##,
    ),
    (
        "try { toHex([1, 2]) } catch (e) { return [e.name, e.message] }",
        r##"completed ["TypeError","toHex's bytes must be bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer); got an array"]"##,
    ),
    // URLs.
    (
        "const u = new URL('../b?x=1#h', 'https://example.com/a/c'); return [u.href, u.host, u.pathname, u.search, u.hash, u.origin, String(u)]",
        r##"completed ["https://example.com/b?x=1#h","example.com","/b","?x=1","#h","https://example.com","https://example.com/b?x=1#h"]"##,
    ),
    (
        "try { new URL('not a url') } catch (e) { return e.name }",
        r##"completed "TypeError""##,
    ),
    (
        "const p = new URLSearchParams('?a=1&b=x+y&a=2&c=%E2%82%AC'); p.append('d', 'é &='); p.set('a', '3'); return [p.get('b'), p.getAll('a'), p.get('c'), p.has('zz'), p.get('zz'), p.toString(), [...p.keys()], p.size]",
        r##"completed ["x y",["3"],"€",false,null,"a=3&b=x+y&c=%E2%82%AC&d=%C3%A9+%26%3D",["a","b","c","d"],4]"##,
    ),
    (
        "const p = new URLSearchParams({z: 1, a: 2}); p.append('a', 1); p.sort(); const seen = []; p.forEach((v, k) => seen.push(k + v)); p.delete('z'); return [seen, p.toString(), String(new URLSearchParams([['x', 'y']])), Object.prototype.toString.call(p)]",
        r##"completed [["a2","a1","z1"],"a=2&a=1","x=y","[object URLSearchParams]"]"##,
    ),
    (
        "const u = new URL('https://x.org/p?q=1'); u.searchParams.append('r', 'two words'); return [u.href, u.searchParams.get('q')]",
        r##"completed ["https://x.org/p?q=1&r=two+words","1"]"##,
    ),
    // structuredClone.
    (
        "const d = new Date(0); const v = {a: [1, {b: 2}], m: new Map([[1, 'x']]), s: new Set([1]), d, u: new Uint8Array([1, 2])}; const c = structuredClone(v); c.a[1].b = 3; return [v.a[1].b, c.m.get(1), c.s.has(1), c.d.getTime(), c.d !== d, Array.from(c.u)]",
        r##"completed [2,"x",true,0,true,[1,2]]"##,
    ),
    (
        "const o = {n: 1}; o.self = o; const c = structuredClone(o); return [c !== o, c.self === c]",
        "completed [true,true]",
    ),
    (
        "let v = {}; for (let i = 1; i < 64; i++) v = {v}; structuredClone(v); v = {v}; try { structuredClone(v) } catch (e) { return [e.name, e.message] }",
        r##"completed ["RangeError","structuredClone: the value nests deeper than 64 levels, the most a value in a run may"]"##,
    ),
    (
        "let v = []; for (let i = 0; i < 100000; i++) v = [v]; try { structuredClone(v) } catch (e) { return e.name }",
        r##"completed "RangeError""##,
    ),
    // Randomness.
    (
        "const u = crypto.randomUUID(); return [/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(u), u !== crypto.randomUUID()]",
        "completed [true,true]",
    ),
    (
        "const a = new Uint32Array(8); const r = crypto.getRandomValues(a); return [r === a, a.some((x) => x !== 0), crypto.getRandomValues(new Uint8Array(65536)).length]",
        "completed [true,true,65536]",
    ),
    (
        "const errors = []; for (const make of [() => new Float64Array(2), () => new DataView(new ArrayBuffer(2)), () => [1], () => new Uint8Array(65537)]) { try { crypto.getRandomValues(make()) } catch (e) { errors.push(e.name + ': ' + e.message) } } return errors",
        r##"completed ["TypeError: getRandomValues takes an integer typed array (Uint8Array, Int32Array, …)","TypeError: getRandomValues takes an integer typed array (Uint8Array, Int32Array, …)","TypeError: getRandomValues takes an integer typed array (Uint8Array, Int32Array, …)","RangeError: getRandomValues fills at most 65536 bytes a call; this array has 65537"]"##,
    ),
    // parallelMap.
    (
        "let active = 0, most = 0; const r = await parallelMap([1, 2, 3, 4, 5, 6, 7], async (n, i) => { active++; most = Math.max(most, active); await sleep(1); active--; return n * 10 + i; }, 3); return [r, most]",
        "completed [[10,21,32,43,54,65,76],3]",
    ),
    (
        "let calls = 0; try { await parallelMap([1, 2, 3, 4, 5, 6], async (n) => { calls++; await sleep(1); if (n === 2) throw new Error('two'); return n; }, 2) } catch (e) { return [e.message, calls < 6] }",
        r##"completed ["two",true]"##,
    ),
    (
        "return [await parallelMap([], (n) => n), await parallelMap(new Set(['a', 'b']), (s) => s.toUpperCase(), 100)]",
        r##"completed [[],["A","B"]]"##,
    ),
    (
        "const errors = []; for (const args of [[[1], 'no'], [[1], (n) => n, 0], [[1], (n) => n, 1.5]]) { try { await parallelMap(...args) } catch (e) { errors.push(e.name) } } return errors",
        r##"completed ["TypeError","RangeError","RangeError"]"##,
    ),
    // The limits, each a catchable error naming itself; the run goes on.
    (
        "try { crypto.digest('SHA-256', 'x'.repeat(5000001)) } catch (e) { return [e.name, e.message] }",
        r##"completed ["RangeError","the data to digest is 5000001 characters, more than the 5000000 characters one call may take"]"##,
    ),
    (
        "try { toHex(new Uint8Array(10 * 1024 * 1024 + 1)) } catch (e) { return [e.name, e.message] }",
        r##"completed ["RangeError","toHex's bytes is 10485761 bytes, more than the 10485760 bytes one call may take"]"##,
    ),
    (
        "try { new TextEncoder().encode('x'.repeat(5000001)) } catch (e) { return e.name }",
        r##"completed "RangeError""##,
    ),
    // Modules a program imports.
    (
        "import { parse, stringify } from \"kiln:csv\";\nconst rows = parse('name,age\\n\"Lovelace, Ada\",36\\nBob,\\n'); return [rows, stringify(rows)]",
        r##"completed [[{"name":"Lovelace, Ada","age":"36"},{"name":"Bob","age":""}],"name,age\n\"Lovelace, Ada\",36\nBob,\n"]"##,
    ),
    (
        "import * as csv from 'kiln:csv'\nimport tsv from 'kiln:csv'\nreturn [csv.parse('a;b\\n1;2', {header: false, delimiter: ';'}), tsv.parse('a,a,b\\n1,2\\n1,2,3,4'), csv === tsv, Object.isFrozen(csv)]",
        r##"completed [[["a","b"],["1","2"]],[{"a":"1","a_1":"2","b":null},{"a":"1","a_1":"2","b":"3","_extra":["4"]}],true,true]"##,
    ),
    (
        "import { stringify } from 'kiln:csv';\nreturn [stringify([{a: 1, b: 'x'}, {b: 'y\"z', c: null}], {delimiter: '\\t'}), stringify([[1, 2], ['a,b', true]]), stringify([{a: 1}], {header: false})]",
        r##"completed ["a\tb\tc\n1\tx\t\n\t\"y\"\"z\"\t\n","1,2\n\"a,b\",true\n","1\n"]"##,
    ),
    (
        "import { parse } from 'kiln:csv';\nconst errors = []; for (const options of [{delimiter: ';;'}, {header: 'yes'}, 7]) { try { parse('a', options) } catch (e) { errors.push(e.message) } } return errors",
        r##"completed ["`delimiter` must be one ASCII character, such as \",\" or \"\\t\"; got \";;\"","`header` must be true or false; got \"yes\"","the options must be an object; got 7"]"##,
    ),
    (
        "import { select, toMarkdown } from 'kiln:html';\nconst page = '<html><body><h1>Title</h1><ul><li><a href=\"/a\" class=\"x\">One</a></li><li><a href=\"/b\">Two  <b>2</b></a></li></ul><script>evil()</script></body></html>';\nreturn [select(page, 'li a'), select(page, 'a', {limit: 1}).length, toMarkdown(page)]",
        r##"completed [[{"tag":"a","text":"One","html":"<a class=\"x\" href=\"/a\">One</a>","attributes":{"class":"x","href":"/a"}},{"tag":"a","text":"Two 2","html":"<a href=\"/b\">Two  <b>2</b></a>","attributes":{"href":"/b"}}],1,"# Title\n\n- [One](/a)\n- [Two **2**](/b)"]"##,
    ),
    (
        "import { select } from 'kiln:html';\nconst errors = []; for (const [css, options] of [['a[', {}], ['a', {limit: 0}], ['a', {limit: 1001}]]) { try { select('<a></a>', css, options) } catch (e) { errors.push(e.name) } } return errors",
        r##"completed ["SyntaxError","RangeError","RangeError"]"##,
    ),
    (
        "import { toHtml } from 'kiln:markdown';\nreturn [toHtml('# Hi\\n\\n*a* ~~b~~ <i>raw</i>\\n\\n| x |\\n| - |\\n| 1 |'), toHtml('<b>ok</b>', {allowHtml: true})]",
        r##"completed ["<h1>Hi</h1>\n<p><em>a</em> <del>b</del> &lt;i&gt;raw&lt;/i&gt;</p>\n<table><thead><tr><th>x</th></tr></thead><tbody>\n<tr><td>1</td></tr>\n</tbody></table>\n","<p><b>ok</b></p>\n"]"##,
    ),
    // kiln:zip: archives written and read back, in memory.
    (
        "import { list, read, write } from 'kiln:zip';\nconst z = write([{name: 'notes/a.txt', data: 'héllo'}, {name: 'notes/'}, {name: 'b.bin', data: new Uint16Array([1, 258]).buffer}, {name: 'c.bin', data: new DataView(new Uint8Array([7, 8, 9]).buffer, 1)}], {level: 9});\nreturn [list(z), read(z, 'notes/a.txt', {text: true}), Array.from(read(z, 'b.bin')), Array.from(read(z.buffer, 'c.bin')), read(z, 'notes/').length, list(write({}))]",
        r##"completed [[{"name":"notes/a.txt","size":6,"compressedSize":8,"isDirectory":false,"modified":"1980-01-01T00:00:00"},{"name":"notes/","size":0,"compressedSize":0,"isDirectory":true,"modified":"1980-01-01T00:00:00"},{"name":"b.bin","size":4,"compressedSize":6,"isDirectory":false,"modified":"1980-01-01T00:00:00"},{"name":"c.bin","size":2,"compressedSize":4,"isDirectory":false,"modified":"1980-01-01T00:00:00"}],"héllo",[1,0,2,1],[8,9],0,[]]"##,
    ),
    (
        "import { list, read, write } from 'kiln:zip';\nconst z = write({'a.txt': 'hello', 'dir/': null, 'dir/b.bin': new Uint8Array([1, 2, 3])}); const stored = write({x: 'x'.repeat(1000)}, {level: 0});\nreturn [z.length, toHex(z.slice(0, 4)), list(z).map((e) => [e.name, e.size, e.isDirectory]), read(z, 'a.txt', {text: true}), Array.from(read(z, 'dir/b.bin')), list(stored)[0].compressedSize]",
        r##"completed [298,"504b0304",[["a.txt",5,false],["dir/",0,true],["dir/b.bin",3,false]],"hello",[1,2,3],1000]"##,
    ),
    (
        "import { list, read, write } from 'kiln:zip';\nconst errors = []; for (const call of [() => list(new Uint8Array(100)), () => list('abc'), () => read(write({}), 'a'), () => read(write({a: '1', b: '2', c: '3', d: '4', e: '5', f: '6', g: '7'}), 'z.txt'), () => write('a'), () => write({a: 5}), () => write([{data: 'x'}]), () => write([{name: 'a', data: 'x'}, {name: 'a', data: 'y'}]), () => write({'x/': 'data'}), () => write({a: 'x'}, {level: 10}), () => write({a: 'x'}, {level: 'fast'})]) { try { call() } catch (e) { errors.push(e.name + ': ' + e.message) } } return errors",
        r##"completed ["SyntaxError: kiln:zip list: the bytes are not a zip archive: invalid Zip archive: Could not find EOCD","TypeError: kiln:zip list takes the archive as bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer); got string","Error: kiln:zip read: the archive has no entry `a`; it is empty","Error: kiln:zip read: the archive has no entry `z.txt`; it has `a`, `b`, `c`, `d`, `e` and 2 more","TypeError: kiln:zip write takes an object {name: data} or an array [{name, data}], each data a string or bytes","TypeError: kiln:zip write: the data of `a` must be a string or bytes (a Uint8Array, another typed array, a DataView or an ArrayBuffer); got number","TypeError: kiln:zip write: entry 0 has no string `name`","TypeError: kiln:zip write: the entry `a` is given twice","TypeError: kiln:zip write: `x/` is a directory (its name ends in `/`) and holds no data","RangeError: kiln:zip write: `level` is a whole number from 0 (stored) to 9 (smallest); got 10","TypeError: kiln:zip write: `level` is a number from 0 to 9; got \"fast\""]"##,
    ),
    // Names that would land outside the folder an archive is unpacked into
    // are refused by name.
    (
        "import { write } from 'kiln:zip';\nconst errors = []; for (const name of ['../x', 'a/../../x', 'a\\\\..\\\\b', '/etc/passwd', '\\\\x', 'C:/x', '']) { try { write({[name]: 'a'}) } catch (e) { errors.push(e.message) } } return errors",
        r##"completed ["kiln:zip write: the entry name `../x` has a `..` component, which escapes the archive; names are relative paths such as `docs/a.txt`","kiln:zip write: the entry name `a/../../x` has a `..` component, which escapes the archive; names are relative paths such as `docs/a.txt`","kiln:zip write: the entry name `a\\..\\b` has a `..` component, which escapes the archive; names are relative paths such as `docs/a.txt`","kiln:zip write: the entry name `/etc/passwd` is an absolute path; names are relative paths such as `docs/a.txt`","kiln:zip write: the entry name `\\x` is an absolute path; names are relative paths such as `docs/a.txt`","kiln:zip write: the entry name `C:/x` starts with a drive letter; names are relative paths such as `docs/a.txt`","kiln:zip write: the entry name `` is empty; names are relative paths such as `docs/a.txt`"]"##,
    ),
    // The bytes bound, on what is read and on what is written.
    (
        "import { read, write } from 'kiln:zip';\nconst errors = []; for (const call of [() => read(new Uint8Array(11 << 20), 'a'), () => write({a: new Uint8Array(6 << 20), b: new Uint8Array(5 << 20)}), () => write({a: 'x'.repeat(5000001)})]) { try { call() } catch (e) { errors.push(e.name + ': ' + e.message) } } return errors",
        r##"completed ["RangeError: kiln:zip read: the archive is 11534336 bytes, more than the 10485760 bytes one call may take","RangeError: kiln:zip write: the entries come to more than the 10485760 bytes one call may take (at `b`, 5242880 bytes)","RangeError: kiln:zip write: `a` is 5000001 characters, more than the 5000000 characters one call may take"]"##,
    ),
    // A zip bomb: one 400 KB entry, built here by hand (a literal zero, then
    // back-references of 258 bytes, 13 bits each) and declaring 4 GB, would
    // inflate to 63 MB; it ends at the run's inflation bound, counted as the
    // bytes come out, and the archive still lists.
    (
        "import { list, read } from 'kiln:zip';\nconst bits = []; const put = (v, n) => { for (let i = 0; i < n; i++) bits.push((v >> i) & 1) }; const code = (v, n) => { for (let i = n - 1; i >= 0; i--) bits.push((v >> i) & 1) };\nput(1, 1); put(1, 2); code(0x30, 8); for (let i = 0; i < 16; i++) { code(0xc5, 8); code(0, 5) }\nconst L = 400000, z = new Uint8Array(30 + 1 + L + 46 + 1 + 22), v = new DataView(z.buffer), d = z.subarray(31, 31 + L);\nfor (let i = 0; i < 27; i++) { let b = 0; for (let j = 0; j < 8; j++) b |= bits[i * 8 + j] << j; d[i] = b }\nfor (let n = 27; n < L;) { const q = Math.floor((n - 2) / 13) * 13; d.copyWithin(2 + q, 2, 2 + q); n = 2 + 2 * q }\nconst header = (at, central) => { v.setUint32(at, central ? 0x02014b50 : 0x04034b50, true); const o = central ? at + 4 : at + 2; if (central) v.setUint16(o, 20, true); v.setUint16(o + 2, 20, true); v.setUint16(o + 6, 8, true); v.setUint16(o + 10, 0x21, true); v.setUint32(o + 16, L, true); v.setUint32(o + 20, 4e9, true); v.setUint16(o + 24, 1, true); z[central ? at + 46 : at + 30] = 97 };\nheader(0, false); header(31 + L, true);\nconst e = 31 + L + 47; v.setUint32(e, 0x06054b50, true); v.setUint16(e + 8, 1, true); v.setUint16(e + 10, 1, true); v.setUint32(e + 12, 47, true); v.setUint32(e + 16, 31 + L, true);\ntry { return read(z, 'a').length } catch (e) { return [list(z), e.name, e.message] }",
        r##"completed [[{"name":"a","size":4000000000,"compressedSize":400000,"isDirectory":false,"modified":"1980-01-01T00:00:00"}],"RangeError","kiln:zip read: inflating `a` would pass the 52428800 bytes a run may inflate"]"##,
    ),
    // The bound is the run's, not the call's: honest entries read again and
    // again end there too, in the middle of an entry; an empty one still reads.
    (
        "import { list, read, write } from 'kiln:zip';\nconst y = write({b: new Uint8Array(4 << 20)}), z = write({a: new Uint8Array(10 << 20)}); const sizes = [read(y, 'b').length];\ntry { for (;;) sizes.push(read(z, 'a').length) } catch (e) { return [sizes, e.name, e.message, read(write({empty: ''}), 'empty').length] }",
        r##"completed [[4194304,10485760,10485760,10485760,10485760],"RangeError","kiln:zip read: inflating `a` would pass the 52428800 bytes a run may inflate",0]"##,
    ),
    // The next run has its whole allowance again.
    (
        "import { read, write } from 'kiln:zip';\nconst z = write({a: new Uint8Array(10 << 20)}); let total = 0; for (let i = 0; i < 5; i++) total += read(z, 'a').length; return total",
        "completed 52428800",
    ),
    // kiln:dates: text in, RFC 9557 text out, the zone carried along. New
    // York springs forward on 2026-03-08 at 02:00 and falls back on
    // 2026-11-01 at 02:00; Berlin springs forward on 2026-03-29.
    (
        "import { parse } from 'kiln:dates';\nreturn [parse('2026-03-08T09:30:00-05:00[America/New_York]'), parse('2026-03-08T14:30:00Z'), parse('2026-03-08'), parse('2026-03-08 09:30', {zone: 'America/New_York'}), parse('2026-03-08T14:30:00Z', {zone: 'America/New_York'}), parse('2026-03-08T02:30', {zone: 'America/New_York'}), parse('2026-11-01T01:30', {zone: 'America/New_York'}), parse('2026-03-08T09:30:00.123+01:00'), parse('2026-03-08T09:30:00-04:00[-04:00]'), parse('  2026-03-08T09:30:00-04:00[america/new_york]  ')]",
        r##"completed ["2026-03-08T09:30:00-04:00[America/New_York]","2026-03-08T14:30:00+00:00[UTC]","2026-03-08T00:00:00+00:00[UTC]","2026-03-08T09:30:00-04:00[America/New_York]","2026-03-08T10:30:00-04:00[America/New_York]","2026-03-08T03:30:00-04:00[America/New_York]","2026-11-01T01:30:00-04:00[America/New_York]","2026-03-08T08:30:00.123+00:00[UTC]","2026-03-08T09:30:00-04:00[-04:00]","2026-03-08T09:30:00-04:00[America/New_York]"]"##,
    ),
    (
        "import { parse } from 'kiln:dates';\nreturn [parse('08/03/2026 09:30', {format: '%d/%m/%Y %H:%M', zone: 'Europe/Berlin'}), parse('2026-03-08 09:30 -0500', {format: '%Y-%m-%d %H:%M %z'}), parse('2026-03-08 09:30 America/New_York', {format: '%Y-%m-%d %H:%M %Q'}), parse('1772980200', {format: '%s', zone: 'Asia/Tokyo'}), parse('March 8, 2026', {format: '%B %-d, %Y'})]",
        r##"completed ["2026-03-08T09:30:00+01:00[Europe/Berlin]","2026-03-08T14:30:00+00:00[UTC]","2026-03-08T09:30:00-04:00[America/New_York]","2026-03-08T23:30:00+09:00[Asia/Tokyo]","2026-03-08T00:00:00+00:00[UTC]"]"##,
    ),
    (
        "import { format, toDate, toZone } from 'kiln:dates';\nconst d = new Date(Date.UTC(2026, 2, 8, 14, 30));\nreturn [format(d), format(d.getTime(), '%Y-%m-%d %H:%M %Z', {zone: 'America/New_York'}), format('2026-03-08T09:30:00-04:00[America/New_York]', '%A %-d %B %Y, %I:%M %p %z %Q'), format('2024-02-29', '%j %U %V %a %b'), format('2026-06-01T12:00:00Z', '%H:%M %Z', {zone: 'Asia/Tokyo'}), toDate('2026-03-08T09:30:00-04:00[America/New_York]').toISOString(), toDate(0) instanceof Date, toZone('2026-03-08T14:30:00Z', 'Asia/Tokyo'), toZone('2026-03-08T09:30:00-04:00[America/New_York]', 'Europe/Berlin'), toZone(0, '+05:30'), toZone('2026-03-08T23:30:00+09:00[Asia/Tokyo]', 'UTC')]",
        r##"completed ["2026-03-08T14:30:00+00:00[UTC]","2026-03-08 10:30 EDT","Sunday 8 March 2026, 09:30 AM -0400 America/New_York","060 08 09 Thu Feb","21:00 JST","2026-03-08T13:30:00.000Z",true,"2026-03-08T23:30:00+09:00[Asia/Tokyo]","2026-03-08T14:30:00+01:00[Europe/Berlin]","1970-01-01T05:30:00+05:30[+05:30]","2026-03-08T14:30:00+00:00[UTC]"]"##,
    ),
    // A calendar day across a DST change is 23 hours; month ends and leap
    // days are kept to the month.
    (
        "import { add } from 'kiln:dates';\nconst ny = '2026-03-07T12:00:00-05:00[America/New_York]';\nreturn [add(ny, {days: 1}), add(ny, {hours: 24}), add('2026-01-31', {months: 1}), add('2024-01-31', {months: 1}), add('2024-02-29', {years: 1}), add('2024-02-29', {years: 4}), add('2026-03-31T10:00:00+02:00[Europe/Berlin]', {days: -3}), add('2026-03-08T14:30:00Z', {weeks: 1, hours: -2, minutes: 30, seconds: 15, milliseconds: 250}), add(ny, {})]",
        r##"completed ["2026-03-08T12:00:00-04:00[America/New_York]","2026-03-08T13:00:00-04:00[America/New_York]","2026-02-28T00:00:00+00:00[UTC]","2024-02-29T00:00:00+00:00[UTC]","2025-02-28T00:00:00+00:00[UTC]","2028-02-29T00:00:00+00:00[UTC]","2026-03-28T10:00:00+01:00[Europe/Berlin]","2026-03-15T13:00:15.25+00:00[UTC]","2026-03-07T12:00:00-05:00[America/New_York]"]"##,
    ),
    (
        "import { difference } from 'kiln:dates';\nconst a = '2026-03-09T00:00:00-04:00[America/New_York]', b = '2026-03-08T00:00:00-05:00[America/New_York]';\nreturn [difference(a, b), difference(a, b, {unit: 'hours'}), difference(b, a, {unit: 'hours'}), difference('2024-03-01', '2024-02-01'), difference('2025-03-01', '2025-02-01'), difference('2026-03-01', '2024-02-29', {unit: 'years'}), difference('2026-03-01', '2024-02-29', {unit: 'months'}), difference('2026-03-01', '2024-02-29', {unit: 'weeks'}), difference('2026-03-08T14:30:00Z', '2026-03-08T14:29:59.5Z', {unit: 'milliseconds'}), difference('2026-03-08T14:30:00Z', '2026-03-08T14:29:59.5Z', {unit: 'seconds'}), difference('2026-03-30T00:00:00+02:00[Europe/Berlin]', '2026-03-29T00:00:00+01:00[Europe/Berlin]', {unit: 'minutes'})]",
        "completed [1,23,-23,29,28,2,24,104,500,0,1380]",
    ),
    (
        "import { startOf, endOf } from 'kiln:dates';\nconst t = '2026-03-08T09:30:45.678-04:00[America/New_York]';\nreturn ['year', 'month', 'week', 'day', 'hour', 'minute', 'second'].map((u) => [u, startOf(t, u), endOf(t, u)]).concat([[startOf('2026-11-01T01:30:00-05:00[America/New_York]', 'hour'), endOf('2026-11-01T01:30:00-04:00[America/New_York]', 'hour'), endOf('2024-02-10', 'month'), startOf('2026-03-08T14:30:00Z', 'day', {zone: 'Asia/Tokyo'})]])",
        r##"completed [["year","2026-01-01T00:00:00-05:00[America/New_York]","2026-12-31T23:59:59.999-05:00[America/New_York]"],["month","2026-03-01T00:00:00-05:00[America/New_York]","2026-03-31T23:59:59.999-04:00[America/New_York]"],["week","2026-03-02T00:00:00-05:00[America/New_York]","2026-03-08T23:59:59.999-04:00[America/New_York]"],["day","2026-03-08T00:00:00-05:00[America/New_York]","2026-03-08T23:59:59.999-04:00[America/New_York]"],["hour","2026-03-08T09:00:00-04:00[America/New_York]","2026-03-08T09:59:59.999-04:00[America/New_York]"],["minute","2026-03-08T09:30:00-04:00[America/New_York]","2026-03-08T09:30:59.999-04:00[America/New_York]"],["second","2026-03-08T09:30:45-04:00[America/New_York]","2026-03-08T09:30:45.999-04:00[America/New_York]"],["2026-11-01T01:00:00-05:00[America/New_York]","2026-11-01T01:59:59.999-04:00[America/New_York]","2024-02-29T23:59:59.999+00:00[UTC]","2026-03-08T00:00:00+09:00[Asia/Tokyo]"]]"##,
    ),
    // Bad input is a catchable error naming it; the limits hold.
    (
        "import { parse, format, add, difference, startOf, toZone } from 'kiln:dates';\nconst errors = []; for (const call of [() => parse('yesterday'), () => parse('2026-13-01'), () => toZone('2026-03-08', 'Mars/Olympus'), () => format('2026-03-08', '%Y', {zone: 'Nowhere'}), () => add('2026-03-08', {day: 1}), () => add('2026-03-08', {days: 1.5}), () => difference('2026-03-08', '2026-03-01', {unit: 'fortnights'}), () => startOf('2026-03-08', 'decade'), () => parse('08/03/2026', {format: '%Y-%m-%d'}), () => format(new Date(NaN)), () => format({}), () => format(1e20), () => format('2026-03-08', '%!')]) { try { errors.push(call()) } catch (e) { errors.push(e.name + ': ' + e.message) } } return errors",
        r##"completed ["SyntaxError: kiln:dates parse: `yesterday` is not an ISO 8601 date such as \"2026-03-08\", \"2026-03-08T09:30:00Z\" or \"2026-03-08T09:30:00-04:00[America/New_York]\": failed to parse four digit integer as year: invalid digit, expected 0-9 but got y","SyntaxError: kiln:dates parse: `2026-13-01` is not an ISO 8601 date such as \"2026-03-08\", \"2026-03-08T09:30:00Z\" or \"2026-03-08T09:30:00-04:00[America/New_York]\": failed to parse two digit integer as month: parameter 'month' is not in the required range of 1..=12","RangeError: kiln:dates toZone: no time zone `Mars/Olympus`; a zone is an IANA name such as \"America/New_York\", \"Europe/Berlin\" or \"UTC\", or an offset such as \"+05:30\"","RangeError: kiln:dates format: no time zone `Nowhere`; a zone is an IANA name such as \"America/New_York\", \"Europe/Berlin\" or \"UTC\", or an offset such as \"+05:30\"","RangeError: kiln:dates add: no unit `day`; the units are years, months, weeks, days, hours, minutes, seconds, milliseconds","RangeError: kiln:dates add: `days` must be a whole number; got 1.5","RangeError: kiln:dates difference: no unit `fortnights`; the units are years, months, weeks, days, hours, minutes, seconds, milliseconds","RangeError: kiln:dates startOf: no unit `decade`; the units are year, month, week, day, hour, minute, second","SyntaxError: kiln:dates parse: `08/03/2026` does not match the format `%Y-%m-%d`: strptime parsing failed: expected to match literal byte `-` from format string, but found byte `/` in input","RangeError: kiln:dates format: the Date is an Invalid Date","TypeError: kiln:dates format takes a date as a Date, epoch milliseconds or ISO 8601 text such as \"2026-03-08T09:30:00Z\"; got object","RangeError: kiln:dates format: 100000000000000000000 milliseconds is outside the years -9999 to 9999 a date may have","SyntaxError: kiln:dates format: cannot format with `%!`: strftime formatting failed: found unrecognized specifier directive `!`"]"##,
    ),
    (
        "import { parse, format, add } from 'kiln:dates';\nconst errors = []; for (const call of [() => parse('2'.repeat(5000001)), () => format('2026-03-08', '%c'.repeat(501)), () => add('2026-03-08', {years: 1e9}), () => add('2026-03-08', {days: 1e15})]) { try { errors.push(call()) } catch (e) { errors.push(e.name + ': ' + e.message) } } return [errors, format('2026-03-08', '%c'.repeat(500)).length]",
        r##"completed [["RangeError: the text is 5000001 characters, more than the 5000000 characters one call may take","RangeError: kiln:dates format: the pattern is 1002 characters, more than the 1000 a pattern may have","RangeError: kiln:dates add: the result is outside the years -9999 to 9999 a date may have","RangeError: kiln:dates add: the result is outside the years -9999 to 9999 a date may have"],12000]"##,
    ),
    // What a program may not import is refused by name before anything runs.
    (
        "import _ from 'lodash';\nreturn 1",
        "syntax import_refused: `lodash` cannot be imported: a program imports only Kiln's own modules (`kiln:csv`, `kiln:html`, `kiln:markdown`, `kiln:yaml`, `kiln:xml`, `kiln:diff`, `kiln:zip`, `kiln:dates`); there are no packages (line 1)",
    ),
    (
        "import { parsed } from 'kiln:csv';\nreturn 1",
        "syntax import_refused: `kiln:csv` has no export `parsed`; it has `parse`, `stringify` (line 1)",
    ),
    (
        "const m = await import('kiln:csv').catch((e) => e.name); return m",
        r##"completed "TypeError""##,
    ),
    ("return 1;\nimport { parse } from 'kiln:csv';", "syntax"),
    // Hostile inputs end in their limits and errors; the run goes on.
    (
        "import { parse } from 'kiln:csv';\ntry { parse('a,b\\n'.repeat(1300000)) } catch (e) { return [e.name, e.message] }",
        r##"completed ["RangeError","the text is 5200000 characters, more than the 5000000 characters one call may take"]"##,
    ),
    (
        "import { select, toMarkdown } from 'kiln:html';\nconst deep = '<div>'.repeat(512) + 'x'; const errors = []; for (const page of ['<div>'.repeat(100000), '<b><i>'.repeat(300)]) { try { select(page, 'span div') } catch (e) { errors.push(e.message) } } return [select(deep, 'div div div', {limit: 2}).length, toMarkdown(deep), select('<p>'.repeat(5000) + '<li>'.repeat(5000), 'li', {limit: 1000}).length, errors]",
        r##"completed [2,"x",1000,["kiln:html select: the page nests elements 100000 levels deep, more than the 512 a page may (browsers stop there too)","kiln:html select: the page nests elements 600 levels deep, more than the 512 a page may (browsers stop there too)"]]"##,
    ),
    (
        "import { select } from 'kiln:html';\nconst page = '<ul>' + '<li><a href=\"#\">x</a></li>'.repeat(20000) + '</ul>'; return [select(page, 'li > a', {limit: 1000}).length, select(page, 'span a').length]",
        r##"completed [1000,0]"##,
    ),
    (
        "import { parse, stringify } from 'kiln:yaml';\nconst doc = parse('name: Ada\\nlangs: [en, fr]\\nborn: 1815\\nnested:\\n  ok: true\\n  none: ~\\n'); return [doc, stringify({a: [1, 'two'], b: {c: null}})]",
        r##"completed [{"name":"Ada","langs":["en","fr"],"born":1815,"nested":{"ok":true,"none":null}},"a:\n- 1\n- two\nb:\n  c: null\n"]"##,
    ),
    (
        "import { parse } from 'kiln:yaml';\nconst errors = []; let bomb = 'a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\\n'; for (let i = 1; i < 10; i++) bomb += `a${i}: &a${i} [${Array(9).fill('*a' + (i - 1)).join(',')}]\\n`; for (const text of [bomb, '[' .repeat(100000), 'a: [1, 2', '{' + '\"a\": {'.repeat(70) + '}'.repeat(71)]) { try { parse(text) } catch (e) { errors.push(e.name + ': ' + e.message.slice(0, 50)) } } return errors",
        r##"completed ["SyntaxError: kiln:yaml parse: repetition limit exceeded","SyntaxError: kiln:yaml parse: recursion limit exceeded at line ","SyntaxError: kiln:yaml parse: did not find expected ',' or ']' ","RangeError: kiln:yaml parse: the document is nested 71 levels "]"##,
    ),
    (
        "import { lines, words, unified } from 'kiln:diff';\nconst a = 'one\\ntwo\\nthree\\n', b = 'one\\n2\\nthree\\nfour\\n'; return [lines(a, b), words('the quick fox', 'the slow fox'), unified(a, b, {from: 'a.txt', to: 'b.txt'}), unified(a, a)]",
        r##"completed [[{"value":"one\n","added":false,"removed":false,"count":1},{"value":"two\n","added":false,"removed":true,"count":1},{"value":"2\n","added":true,"removed":false,"count":1},{"value":"three\n","added":false,"removed":false,"count":1},{"value":"four\n","added":true,"removed":false,"count":1}],[{"value":"the ","added":false,"removed":false,"count":2},{"value":"quick","added":false,"removed":true,"count":1},{"value":"slow","added":true,"removed":false,"count":1},{"value":" fox","added":false,"removed":false,"count":2}],"--- a.txt\n+++ b.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n",""]"##,
    ),
    (
        "import { lines, unified } from 'kiln:diff';\nconst big = 'x\\n'.repeat(2500000); const errors = []; for (const call of [() => lines(big, big), () => unified('a', 'b', {context: -1}), () => lines('a\\n'.repeat(20001), '')]) { try { call() } catch (e) { errors.push(e.message) } } return errors",
        r##"completed ["kiln:diff lines: the before text has 2500000 lines, more than the 20000 a diff compares","kiln:diff unified: `context` is a number of lines from 0 to 1000; got -1","kiln:diff lines: the before text has 20001 lines, more than the 20000 a diff compares"]"##,
    ),
    (
        "import { parse, stringify } from 'kiln:xml';\nconst doc = parse('<?xml version=\"1.0\"?><!-- c --><feed lang=\"en\"><title>T &amp; U &#233;</title><entry id=\"1\"><name>A</name></entry><entry id=\"2\"><name><![CDATA[<b>]]></name></entry><empty/><mixed>x<b>y</b></mixed></feed>'); return [doc, stringify(doc), parse('<a k=\"v\">t</a>', {attributePrefix: '_', textKey: 'text'})]",
        r##"completed [{"feed":{"@lang":"en","title":"T & U é","entry":[{"@id":"1","name":"A"},{"@id":"2","name":"<b>"}],"empty":"","mixed":{"b":"y","#text":"x"}}},"<feed lang=\"en\"><title>T &amp; U é</title><entry id=\"1\"><name>A</name></entry><entry id=\"2\"><name>&lt;b&gt;</name></entry><empty></empty><mixed><b>y</b>x</mixed></feed>",{"a":{"_k":"v","text":"t"}}]"##,
    ),
    (
        "import { parse, stringify } from 'kiln:xml';\nconst errors = []; for (const text of ['<!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;\">]><lolz>&lol2;</lolz>', '<a>'.repeat(100) + '</a>'.repeat(100), '<a><b></a>', '<a>']) { try { parse(text) } catch (e) { errors.push(e.name) } } for (const value of [[1], {'bad name': 1}]) { try { stringify(value) } catch (e) { errors.push(e.message) } } return errors",
        r##"completed ["SyntaxError","RangeError","SyntaxError","SyntaxError","kiln:xml stringify takes an object, its one key the root element: {note: {...}}","kiln:xml stringify: `bad name` is not an element name"]"##,
    ),
    // Locale-aware formatting, each golden output what Chromium's `Intl`
    // gives for the same call (the browser backend is that `Intl`; natively
    // ICU4X must give the same text, its spaces included).
    (
        "return [format.number(1234.5), format.number(1234.5, {locale: 'de'}), format.number(0.256, {style: 'percent'}), format.number(-1234.567, {locale: 'fr', maximumFractionDigits: 1}), format.number(1234.5, {style: 'currency', currency: 'usd'}), format.number(1234.5, {locale: 'ja', style: 'currency', currency: 'JPY'}), format.number(1234.5, {locale: 'es', style: 'currency', currency: 'EUR'}), format.number(1234567.891, {locale: 'zh', useGrouping: false, minimumFractionDigits: 2, maximumFractionDigits: 2})]",
        "completed [\"1,234.5\",\"1.234,5\",\"26%\",\"-1\u{202f}234,6\",\"$1,234.50\",\"￥1,235\",\"1234,50\u{a0}€\",\"1234567.89\"]",
    ),
    (
        "return [format.number(1234.5, {locale: 'es', useGrouping: true}), format.number(12345.5, {locale: 'es', useGrouping: 'min2'}), format.number(1234.5, {useGrouping: 'min2'}), format.number(1234.5, {useGrouping: false})]",
        r##"completed ["1.234,5","12.345,5","1234.5","1234.5"]"##,
    ),
    (
        "const d = Date.UTC(2026, 11, 7, 15, 4, 5);\nreturn [format.date(d), format.date(d, {locale: 'de', dateStyle: 'full', timeZone: 'Europe/Berlin'}), format.date(new Date(d), {locale: 'fr', dateStyle: 'long', timeStyle: 'short', timeZone: 'Europe/Paris'}), format.date('2026-12-07T15:04:05Z', {locale: 'ja', dateStyle: 'medium', timeStyle: 'medium', timeZone: 'Asia/Tokyo'}), format.date('2026-03-08T09:30:00-04:00[America/New_York]', {timeStyle: 'short', timeZone: 'America/New_York'}), format.date(d, {locale: 'zh', dateStyle: 'short'}), format.date('2026-07-01T00:00', {locale: 'es', dateStyle: 'long', timeZone: 'America/Mexico_City'})]",
        "completed [\"Dec 7, 2026\",\"Montag, 7. Dezember 2026\",\"7 décembre 2026 à 16:04\",\"2026/12/08 0:04:05\",\"9:30 AM\",\"2026/12/7\",\"1 de julio de 2026\"]",
    ),
    (
        "return [format.relativeTime(-1, 'day', {numeric: 'auto'}), format.relativeTime(2, 'days'), format.relativeTime(-3, 'month', {locale: 'de'}), format.relativeTime(1, 'year', {locale: 'fr', numeric: 'auto'}), format.relativeTime(-5, 'minute', {locale: 'ja', style: 'short'}), format.relativeTime(1.5, 'hour', {locale: 'es'}), format.relativeTime(0, 'day', {locale: 'zh', numeric: 'auto'})]",
        "completed [\"yesterday\",\"in 2 days\",\"vor 3 Monaten\",\"l’année prochaine\",\"5 分前\",\"dentro de 1,5 horas\",\"今天\"]",
    ),
    (
        "return [format.list(['a', 'b', 'c']), format.list(['a', 'b'], {type: 'disjunction'}), format.list(['Äpfel', 'Birnen', 'Kirschen'], {locale: 'de'}), format.list(['a', 'b', 'c'], {locale: 'es', type: 'disjunction'}), format.list(['x', 'y', 'z'], {locale: 'ja'}), format.list(['1', '2', '3'], {locale: 'zh', type: 'unit', style: 'narrow'}), format.list([]), format.list(['solo'])]",
        "completed [\"a, b, and c\",\"a or b\",\"Äpfel, Birnen und Kirschen\",\"a, b o c\",\"x、y、z\",\"123\",\"\",\"solo\"]",
    ),
    (
        "const errors = [];\nfor (const call of [() => format.number('1'), () => format.number(1, {style: 'currency'}), () => format.number(1, {locale: 'not a tag'}), () => format.number(1, {minimumFractionDigits: 3, maximumFractionDigits: 1}), () => format.date(0, {timeZone: 'Mars/Olympus'}), () => format.date(0, {timeStyle: 'full'}), () => format.relativeTime(1, 'fortnight'), () => format.list([1])]) { try { call(); errors.push('no error') } catch (e) { errors.push(`${e.name}: ${e.message}`) } }\nreturn errors",
        "completed [\"TypeError: format.number: takes a number to format; got the string \\\"1\\\"\",\"TypeError: format.number: `style: \\\"currency\\\"` needs `currency`, an ISO 4217 code such as \\\"EUR\\\"\",\"RangeError: format.number: `locale` must be a language tag such as \\\"en\\\", \\\"de-CH\\\" or \\\"zh-Hans\\\"; got \\\"not a tag\\\"\",\"RangeError: format.number: `minimumFractionDigits` (3) is more than `maximumFractionDigits` (1)\",\"RangeError: format.date: no time zone `Mars/Olympus`; a zone is an IANA name such as \\\"America/New_York\\\", \\\"Europe/Berlin\\\" or \\\"UTC\\\", or an offset such as \\\"+05:30\\\"\",\"RangeError: format.date: `timeStyle` must be one of \\\"medium\\\", \\\"short\\\"; got \\\"full\\\"\",\"RangeError: format.relativeTime: the unit must be one of \\\"year\\\", \\\"quarter\\\", \\\"month\\\", \\\"week\\\", \\\"day\\\", \\\"hour\\\", \\\"minute\\\", \\\"second\\\"; got \\\"fortnight\\\"\",\"TypeError: format.list: item 0 is a number, not a string\"]",
    ),
];
