// Counts tokens of text samples with OpenAI's o200k_base and cl100k_base (js-tiktoken),
// writing harness/testdata/tokens.json: the reference the estimator is measured against.
const { getEncoding } = require("js-tiktoken");
const fs = require("fs");
const o200k = getEncoding("o200k_base"), cl100k = getEncoding("cl100k_base");
const files = process.argv.slice(3);
const out = [];
for (const f of files) {
  const s = fs.readFileSync(f, "utf8");
  const kind = f.split("/").pop();
  for (let off = 0, n = 0; off < s.length && n < 3; off += 1500, n++) {
    const text = s.slice(off, off + 1500);
    out.push({ source: kind, text, o200k: o200k.encode(text).length, cl100k: cl100k.encode(text).length });
  }
}
fs.writeFileSync(process.argv[2], JSON.stringify(out, null, 1) + "\n");
console.log(out.length, "samples");
