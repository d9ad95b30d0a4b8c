//! The model's files: the manifest, then each file from the Cache API when a
//! copy there matches the manifest's size and SHA-256, else downloaded with
//! progress, checked, and put in the cache. The bytes stay in JavaScript
//! (chunks, the digest, the cache's copy) and cross into wasm once, for the
//! model to load. The manifest and each file are held to the rules the native
//! host keeps too (`kiln_llm::Manifest::parse`, `ManifestFile::check_length`,
//! `ManifestFile::check_digest`): here the browser computes the digest.

use js_sys::{Reflect, Uint8Array};
use kiln_llm::{Manifest, ManifestFile};
use kiln_types::model::{MODEL_CACHE, ModelFailure};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, ReadableStreamDefaultReader, RequestCache, RequestInit, Response};

use crate::scope;

/// What reading one file came to.
pub(crate) struct Fetched {
    pub bytes: Vec<u8>,
    pub from_cache: bool,
    /// A cached copy that did not match was dropped; or the cache refused the
    /// new one. Said to the person, not a failure.
    pub warning: Option<String>,
}

/// The progress of one download: `(loaded, total)` of the whole model.
pub(crate) type Progress<'a> = &'a dyn Fn(u64, u64);

pub(crate) fn failure(code: &str, message: String, hint: Option<&str>) -> ModelFailure {
    ModelFailure {
        code: code.to_owned(),
        message,
        hint: hint.map(str::to_owned),
    }
}

const RETRY: &str = "send the message again to retry; the download starts over";

/// How long a download may go without a byte before it is given up.
const STALL_MS: i32 = 30_000;

/// The reader's next piece, or `None` when none came within `ms`.
async fn read_within(
    reader: &ReadableStreamDefaultReader,
    ms: i32,
) -> Result<Option<JsValue>, JsValue> {
    use futures::FutureExt as _;
    let scope = scope().ok_or_else(|| JsValue::from_str("not in a worker"))?;
    let timer = js_sys::Promise::new(&mut |resolve, _reject| {
        let _ = scope.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
    });
    let mut read = JsFuture::from(reader.read()).fuse();
    let mut stalled = JsFuture::from(timer).fuse();
    futures::select! {
        chunk = read => chunk.map(Some),
        _ = stalled => Ok(None),
    }
}

fn describe(error: &JsValue) -> String {
    if let Some(error) = error.dyn_ref::<js_sys::Error>() {
        return format!(
            "{}: {}",
            String::from(error.name()),
            String::from(error.message())
        );
    }
    if let Some(error) = error.dyn_ref::<web_sys::DomException>() {
        return format!("{}: {}", error.name(), error.message());
    }
    error.as_string().unwrap_or_else(|| format!("{error:?}"))
}

async fn cache() -> Result<Cache, String> {
    let storage = scope()
        .ok_or("not in a worker")?
        .caches()
        .map_err(|error| describe(&error))?;
    let cache = JsFuture::from(storage.open(MODEL_CACHE))
        .await
        .map_err(|error| describe(&error))?;
    cache
        .dyn_into()
        .map_err(|_| "the Cache API answered no cache".to_owned())
}

/// Deletes every cached file of the model.
pub(crate) async fn clear() -> Result<(), ModelFailure> {
    let storage = scope()
        .ok_or_else(|| failure("model_unavailable", "not in a worker".into(), None))?
        .caches()
        .map_err(|error| failure("model_unavailable", describe(&error), None))?;
    JsFuture::from(storage.delete(MODEL_CACHE))
        .await
        .map(|_| ())
        .map_err(|error| {
            failure(
                "model_unavailable",
                format!(
                    "the cached model could not be deleted: {}",
                    describe(&error)
                ),
                None,
            )
        })
}

/// `url`, asked of the server past the browser's HTTP cache: the manifest
/// revalidated (`no-cache`), the model's files not kept there at all
/// (`no-store`): they keep their names from one build to the next, and the
/// Cache API holds the one copy.
async fn fetch(url: &str, cache: RequestCache) -> Result<Response, JsValue> {
    let scope = scope().ok_or_else(|| JsValue::from_str("not in a worker"))?;
    let init = RequestInit::new();
    init.set_cache(cache);
    let response = JsFuture::from(scope.fetch_with_str_and_init(url, &init)).await?;
    response.dyn_into()
}

/// The manifest the build wrote beside the files (asked of the server each
/// time, revalidated, so that a new build is seen; the cached one when the
/// server cannot be reached).
pub(crate) async fn manifest(base_url: &str) -> Result<Manifest, ModelFailure> {
    let url = format!("{base_url}/{}", kiln_llm::MANIFEST_FILE);
    let response = match fetch(&url, RequestCache::NoCache).await {
        Ok(response) if response.ok() => response,
        Ok(response) => {
            return Err(failure(
                "model_unavailable",
                format!("{url} answered HTTP {}", response.status()),
                Some("the build writes the model into pkg/models/: serve the whole of pkg/"),
            ));
        }
        Err(error) => match cached_response(&url).await {
            Some(response) => response,
            None => {
                return Err(failure(
                    "network",
                    format!("{url} could not be fetched: {}", describe(&error)),
                    Some(RETRY),
                ));
            }
        },
    };
    let text = JsFuture::from(
        response
            .text()
            .map_err(|error| failure("network", describe(&error), Some(RETRY)))?,
    )
    .await
    .map_err(|error| failure("network", describe(&error), Some(RETRY)))?
    .as_string()
    .unwrap_or_default();
    // Plain names (never a path out of the model's folder), sizes within
    // what the worker takes, digests to check against.
    let manifest = Manifest::parse(text.as_bytes()).map_err(|error| {
        failure(
            error.code(),
            format!("{url}: {error}"),
            Some("build the app again (`cargo xtask build`)"),
        )
    })?;
    if let Ok(cache) = cache().await
        && let Ok(copy) = Response::new_with_opt_str(Some(&text))
    {
        let _ = JsFuture::from(cache.put_with_str(&url, &copy)).await;
    }
    Ok(manifest)
}

async fn cached_response(url: &str) -> Option<Response> {
    let cache = cache().await.ok()?;
    let found = JsFuture::from(cache.match_with_str(url)).await.ok()?;
    found.dyn_into().ok()
}

async fn array(response: &Response) -> Result<Uint8Array, JsValue> {
    let buffer = JsFuture::from(response.array_buffer()?).await?;
    Ok(Uint8Array::new(&buffer))
}

/// Lower-case hex SHA-256 of `bytes`, by the browser's own digest.
async fn sha256(bytes: &Uint8Array) -> Result<String, JsValue> {
    let scope = scope().ok_or_else(|| JsValue::from_str("not in a worker"))?;
    let subtle = scope.crypto()?.subtle();
    let digest =
        JsFuture::from(subtle.digest_with_str_and_buffer_source("SHA-256", bytes)?).await?;
    Ok(Uint8Array::new(&digest)
        .to_vec()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

/// Whether `bytes`, from `url`, are the file the manifest describes; why
/// not, if not: the size first, then the digest.
async fn mismatch(url: &str, bytes: &Uint8Array, file: &ManifestFile) -> Option<String> {
    if let Err(error) = file.check_length(url, u64::from(bytes.length())) {
        return Some(error.to_string());
    }
    match sha256(bytes).await {
        Ok(digest) => file
            .check_digest(url, &digest)
            .err()
            .map(|error| error.to_string()),
        Err(error) => Some(format!(
            "the digest of {url} could not be taken: {}",
            describe(&error)
        )),
    }
}

/// One file: the cached copy when it is right, else a download. `done` is
/// what earlier files of the model already counted, `total` all of them.
/// `cleared` says whether the cache was cleared since the load began: a file
/// downloaded then is used, never put back.
pub(crate) async fn file(
    base_url: &str,
    file: &ManifestFile,
    done: u64,
    total: u64,
    progress: Progress<'_>,
    cleared: &dyn Fn() -> bool,
) -> Result<Fetched, ModelFailure> {
    let url = format!("{base_url}/{}", file.file);
    let mut warning = None;
    if let Some(response) = cached_response(&url).await {
        match array(&response).await {
            Ok(bytes) => match mismatch(&url, &bytes, file).await {
                None => {
                    return Ok(Fetched {
                        bytes: bytes.to_vec(),
                        from_cache: true,
                        warning: None,
                    });
                }
                Some(why) => {
                    warning = Some(format!(
                        "the cached copy was damaged ({why}) and was deleted; it was downloaded again"
                    ));
                    forget(&url).await;
                }
            },
            Err(_) => forget(&url).await,
        }
    }
    let bytes = download(&url, file, done, total, progress).await?;
    if let Some(why) = mismatch(&url, &bytes, file).await {
        return Err(failure(
            "model_corrupt",
            format!("the download is not the build's file: {why}"),
            Some(
                "the server may hold another build's files: build and serve the app again, then retry",
            ),
        ));
    }
    if cleared() {
        // Not kept: the person deleted the cache while this came.
    } else if let Err(why) = keep(&url, &bytes).await {
        warning = Some(format!(
            "the browser did not keep the model ({why}): it runs now and is downloaded again next time; free some space for this site to keep it"
        ));
    }
    Ok(Fetched {
        bytes: bytes.to_vec(),
        from_cache: false,
        warning,
    })
}

async fn forget(url: &str) {
    if let Ok(cache) = cache().await {
        let _ = JsFuture::from(cache.delete_with_str(url)).await;
    }
}

/// Drops the cached copies of the manifest's files (a copy that checked out but
/// would not load).
pub(crate) async fn forget_files(base_url: &str, manifest: &Manifest) {
    for file in [&manifest.weights, &manifest.tokenizer] {
        forget(&format!("{base_url}/{}", file.file)).await;
    }
}

async fn keep(url: &str, bytes: &Uint8Array) -> Result<(), String> {
    let cache = cache().await?;
    let response =
        Response::new_with_opt_buffer_source(Some(bytes)).map_err(|error| describe(&error))?;
    JsFuture::from(cache.put_with_str(url, &response))
        .await
        .map(|_| ())
        .map_err(|error| describe(&error))
}

/// Reads `url`'s body chunk by chunk into one array of the manifest's size,
/// reporting progress at most every 1 % of the file.
async fn download(
    url: &str,
    file: &ManifestFile,
    done: u64,
    total: u64,
    progress: Progress<'_>,
) -> Result<Uint8Array, ModelFailure> {
    let stopped = |loaded: u64, why: String| {
        failure(
            "model_unavailable",
            format!(
                "the download of {url} stopped after {loaded} of {} bytes: {why}",
                file.bytes
            ),
            Some(RETRY),
        )
    };
    let response = fetch(url, RequestCache::NoStore).await.map_err(|error| {
        failure(
            "network",
            format!("{url} could not be fetched: {}", describe(&error)),
            Some(RETRY),
        )
    })?;
    if !response.ok() {
        return Err(failure(
            "model_unavailable",
            format!("{url} answered HTTP {}", response.status()),
            Some(if response.status() == 404 {
                "the build writes the model into pkg/models/: serve the whole of pkg/"
            } else {
                RETRY
            }),
        ));
    }
    // The browser may refuse an array this large (a small device): said, not thrown.
    let whole: Uint8Array = Reflect::construct(
        &js_sys::Uint8Array::new_with_length(0).constructor(),
        &js_sys::Array::of1(&JsValue::from_f64(file.bytes as f64)),
    )
    .ok()
    .and_then(|array| array.dyn_into().ok())
    .ok_or_else(|| {
        failure(
            "model_unavailable",
            format!(
                "this browser would not set aside {} bytes for {}",
                file.bytes, file.file
            ),
            Some("close other tabs, or use a provider with a key"),
        )
    })?;
    let body = response
        .body()
        .ok_or_else(|| stopped(0, "the response has no body".into()))?;
    let reader: ReadableStreamDefaultReader = body
        .get_reader()
        .dyn_into()
        .map_err(|_| stopped(0, "the body cannot be read".into()))?;
    let mut loaded: u64 = 0;
    let step = (file.bytes / 100).max(1);
    let mut reported: u64 = 0;
    progress(done, total);
    loop {
        let chunk = match read_within(&reader, STALL_MS).await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                let _ = reader.cancel();
                return Err(stopped(
                    loaded,
                    format!("no data came for {} s", STALL_MS / 1000),
                ));
            }
            Err(error) => return Err(stopped(loaded, describe(&error))),
        };
        let finished = Reflect::get(&chunk, &JsValue::from_str("done"))
            .ok()
            .and_then(|done| done.as_bool())
            .unwrap_or(true);
        if finished {
            break;
        }
        let value: Uint8Array = Reflect::get(&chunk, &JsValue::from_str("value"))
            .ok()
            .and_then(|value| value.dyn_into().ok())
            .ok_or_else(|| stopped(loaded, "a piece of the body is not bytes".into()))?;
        let length = u64::from(value.length());
        if loaded + length > file.bytes {
            let _ = reader.cancel();
            return Err(failure(
                "model_corrupt",
                format!("{url} is longer than the manifest's {} bytes", file.bytes),
                Some(
                    "the server may hold another build's files: build and serve the app again, then retry",
                ),
            ));
        }
        // `loaded` fits: it is under `file.bytes`, which `Manifest::parse`
        // keeps within `kiln_llm::MAX_WEIGHTS_BYTES`, a u32.
        whole.set(&value, u32::try_from(loaded).unwrap_or(0));
        loaded += length;
        if loaded - reported >= step {
            reported = loaded;
            progress(done + loaded, total);
        }
    }
    if loaded != file.bytes {
        return Err(stopped(
            loaded,
            "the server ended the response early".into(),
        ));
    }
    progress(done + loaded, total);
    Ok(whole)
}
