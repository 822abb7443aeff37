// The tokenizer oracle (issue 14): HF's own implementation (npm `tokenizers`, the Rust
// core) encodes and decodes a corpus with a tokenizer.json; the engine's tokenizer must
// agree id for id (tests/tokenizer/test_tokenizer_hf.cpp).
//   node hf_oracle.mjs TOKENIZER_DIR OUT.json
// Each corpus entry is bytes (hex); entries that are not valid UTF-8 are given to HF as
// a WHATWG TextDecoder reads them (U+FFFD per invalid subsequence), the engine's rule.
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.cwd(), "package.json"));
const { Tokenizer } = require("tokenizers");
const [dir, out] = process.argv.slice(2);
if (!dir || !out) throw new Error("usage: node hf_oracle.mjs TOKENIZER_DIR OUT.json");
const tok = Tokenizer.fromFile(path.join(dir, "tokenizer.json"));

const utf8 = (s) => Buffer.from(s, "utf8");
const corpus = [
  ["english", utf8("The quick brown fox jumps over the lazy dog. It's 5 o'clock, isn't it?")],
  ["chinese", utf8("深度学习是机器学习的一个分支，它使用多层神经网络。我们今天去北京吧！")],
  ["japanese", utf8("東京は日本の首都です。ひらがなとカタカナ、そして漢字。ｶﾀｶﾅ半角もある。")],
  ["korean", utf8("안녕하세요, 세계! 한국어 문장입니다.")],
  ["arabic", utf8("مرحبا بالعالم، هذه جملة عربية مع أرقام ١٢٣٤٥.")],
  ["hebrew", utf8("שלום עולם, זה משפט בעברית.")],
  ["hindi", utf8("नमस्ते दुनिया, यह हिंदी वाक्य है। क्षत्रिय")],
  ["thai", utf8("สวัสดีชาวโลก นี่คือประโยคภาษาไทย")],
  ["russian_greek", utf8("Привет, мир! Ελληνικά: Καλημέρα κόσμε. Ёжик.")],
  ["latin_accents", utf8("Ça va? Àéîõü ß Œuvre naïve façade — “quotes” ‘single’ «guillemets»")],
  ["combining", utf8("e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353 \u0915\u094D\u0937")],
  ["emoji", utf8("I ❤️ 🦀 and 🐍! 👨‍👩‍👧‍👦 👍🏽 🇩🇪🇯🇵 1️⃣ 🫨🩷 (Unicode 15)")],
  ["unicode15_cjk_ext", utf8("\u{31350}\u{31351} \u{30000} \u{1FAE8}\u{1F6DC}")],
  // Assigned after Unicode 15.0 (CJK Ext I 15.1, Supplemental Arrows-C 16.0): the
  // engine's ICU may not know them (test_tokenizer_hf.cpp skips such entries by name).
  ["post_unicode15", utf8("x \u{2EBF0}\u{2EBF1}  \u{1F8B9}!")],
  ["code_python", utf8("def fib(n):\n    if n < 2:\n        return n\n    return fib(n-1) + fib(n-2)\n\nprint([fib(i) for i in range(10)])\n")],
  ["code_cpp", utf8("#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (auto& x : v) x *= 2; // double\n\treturn v[0]==2?0:1;\n}\r\n")],
  ["json", utf8('{"key": [1, 2.5e-3, null, true], "nested": {"a\\"b": "c\\\\d"}}')],
  ["whitespace_runs", utf8(" ".repeat(1000) + "x" + "\t".repeat(37) + "\n\n\n  \r\n \u00A0\u3000\u2003end   ")],
  ["newlines_only", utf8("\n\n\r\n\r\r\n\n")],
  ["digits", utf8("1 12 123 1234 12345 1234567890123 3.14159 -42 0x1F ١٢٣ １２３ ⅫⅣ ²³ 1,000,000")],
  ["special_in_text", utf8("<｜begin▁of▁sentence｜>System<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>")],
  ["special_adjacent", utf8("<｜User｜><｜User｜>x<｜Assistant｜><｜end▁of▁sentence｜><｜end▁of▁sentence｜>")],
  ["special_partial", utf8("<｜User <｜User| <｜Assistant｜ <｜▁pad▁｜>> <<｜tool▁sep｜>>")],
  ["punctuation", utf8("!!! ??? ... --- ((( ))) [[]] {{}} @#$%^&*_+=~`|\\/<>,.;:'\"")],
  ["mixed_scripts", utf8("Hello世界123abc한국テスト!مرحباEnd")],
  ["zero_width", utf8("a\u200Bb\u200Cc\u200Dd\uFEFFe\u2060f")],
  ["empty", Buffer.alloc(0)],
  ["single_space", utf8(" ")],
  ["invalid_lone_continuation", Buffer.from([0x61, 0x80, 0x62])],
  ["invalid_truncated", Buffer.from([0x61, 0xE4, 0xB8, 0x20, 0xF0, 0x9F, 0x98])],
  ["invalid_overlong_surrogate", Buffer.from([0xC0, 0xAF, 0x20, 0xED, 0xA0, 0x80, 0x20, 0xF5, 0x80, 0xFF])],
  ["invalid_mixed", Buffer.concat([utf8("ok "), Buffer.from([0xC3]), utf8(" 中"), Buffer.from([0xE4, 0xB8])])],
];

// Seeded random strings over many ranges (xorshift32, fixed seed): fuzzes splits and merges.
let state = 0x9e3779b9;
const rnd = (n) => {
  state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0;
  return state % n;
};
const ranges = [[0x20, 0x7e], [0x09, 0x0d], [0xa0, 0x17f], [0x370, 0x3ff], [0x400, 0x4ff],
  [0x590, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x3040, 0x30ff], [0x4e00, 0x9fa5],
  [0xac00, 0xd7a3], [0x2000, 0x206f], [0xff00, 0xffef], [0x1f300, 0x1f6ff], [0x30, 0x39]];
for (let k = 0; k < 300; ++k) {
  let s = "";
  const len = 1 + rnd(60);
  for (let i = 0; i < len; ++i) {
    if (rnd(10) === 0) { s += [" ", "  ", "\n", "<｜User｜>", "<｜end▁of▁sentence｜>"][rnd(5)]; continue; }
    const [lo, hi] = ranges[rnd(ranges.length)];
    const cp = lo + rnd(hi - lo + 1);
    const ch = String.fromCodePoint(cp);
    if (/\p{Cn}/u.test(ch)) continue;  // unassigned: no tokenizer is asked to agree there
    s += ch;
  }
  corpus.push([`random_${k}`, utf8(s)]);
}

const entries = [];
for (const [name, bytes] of corpus) {
  const text = new TextDecoder("utf-8").decode(bytes);
  const enc = await tok.encode(text, null, { addSpecialTokens: false });
  const ids = Array.from(enc.getIds());
  entries.push({
    name, hex: bytes.toString("hex"), text_hex: utf8(text).toString("hex"), ids,
    decoded_hex: utf8(await tok.decode(ids, false)).toString("hex"),
    decoded_skip_hex: utf8(await tok.decode(ids, true)).toString("hex"),
  });
}
writeFileSync(out, JSON.stringify(entries));
console.log(`hf_oracle: ${entries.length} entries from ${dir} -> ${out}`);
