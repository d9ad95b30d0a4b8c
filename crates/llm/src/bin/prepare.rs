//! `kiln-model-prepare IN.gguf OUT_DIR [q8_0|q4_0]`: writes the re-quantized
//! weights, the tokenizer and `manifest.json` into OUT_DIR (the build's
//! `pkg/models/`), printing one line of what it wrote.

use std::path::PathBuf;
use std::process::ExitCode;

use kiln_llm::prepare::{Target, prepare};

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("kiln-model-prepare: {error}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<String, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (input, out_dir) = match args.as_slice() {
        [input, out_dir] | [input, out_dir, _] => (PathBuf::from(input), PathBuf::from(out_dir)),
        _ => return Err("usage: kiln-model-prepare IN.gguf OUT_DIR [q8_0|q4_0]".to_owned()),
    };
    let target = match args.get(2) {
        None => Target::Q8_0,
        Some(name) => {
            Target::parse(name).ok_or_else(|| format!("`{name}`: expected q8_0 or q4_0"))?
        }
    };
    let gguf = std::fs::read(&input).map_err(|error| format!("{}: {error}", input.display()))?;
    let prepared = prepare(&gguf, target).map_err(|error| error.to_string())?;
    std::fs::create_dir_all(&out_dir).map_err(|error| format!("{}: {error}", out_dir.display()))?;
    let write = |name: &str, bytes: &[u8]| {
        let path = out_dir.join(name);
        std::fs::write(&path, bytes).map_err(|error| format!("{}: {error}", path.display()))
    };
    write(&prepared.manifest.weights.file, &prepared.weights)?;
    write(&prepared.manifest.tokenizer.file, &prepared.tokenizer)?;
    let manifest =
        serde_json::to_vec_pretty(&prepared.manifest).map_err(|error| error.to_string())?;
    write(kiln_llm::MANIFEST_FILE, &manifest)?;
    Ok(format!(
        "kiln-model-prepare: {} ({} bytes) and {} into {}",
        prepared.manifest.weights.file,
        prepared.manifest.weights.bytes,
        prepared.manifest.tokenizer.file,
        out_dir.display()
    ))
}
