//! `kiln:csv`: delimited text over the `csv` crate.

use boa_engine::object::builtins::JsArray;
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue};
use serde_json::{Value, json};

use super::{byte, cell, flag, options, to_js};
use crate::stdlib::{argument, string_argument};

/// `parse(text, {header, delimiter, quote, trim})`.
pub(super) fn parse(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let text = string_argument(args, 0, context)?;
    let options = options(args, 1, context)?;
    let header = flag(&options, "header", true)?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(byte(&options, "delimiter", b',')?)
        .quote(byte(&options, "quote", b'"')?)
        .trim(if flag(&options, "trim", false)? {
            csv::Trim::All
        } else {
            csv::Trim::None
        })
        .from_reader(text.as_bytes());
    let mut records = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|error| {
            JsNativeError::syntax().with_message(format!("kiln:csv parse: {error}"))
        })?;
        records.push(record.iter().map(str::to_owned).collect::<Vec<String>>());
    }
    if !header {
        return to_js(&json!(records), context);
    }
    let mut rows = records.into_iter();
    let Some(names) = rows.next() else {
        return to_js(&json!([]), context);
    };
    // A name the header repeats gets a suffix (`a`, `a_1`), so no column is lost.
    let mut keys: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        let mut key = name.clone();
        let mut suffix = 0;
        while keys.contains(&key) {
            suffix += 1;
            key = format!("{name}_{suffix}");
        }
        keys.push(key);
    }
    // Built straight into the engine's objects, each key made once: going
    // through JSON values first cost about half the time of a parse.
    let keys: Vec<JsString> = keys
        .iter()
        .map(|key| JsString::from(key.as_str()))
        .collect();
    let extra = JsString::from("_extra");
    let mut objects = Vec::new();
    for row in rows {
        let object = JsObject::with_object_proto(context.intrinsics());
        for (index, key) in keys.iter().enumerate() {
            let cell: JsValue = row
                .get(index)
                .map_or_else(JsValue::null, |cell| JsString::from(cell.as_str()).into());
            object.create_data_property_or_throw(key.clone(), cell, context)?;
        }
        if row.len() > keys.len() {
            let cells = row[keys.len()..]
                .iter()
                .map(|cell| JsString::from(cell.as_str()).into());
            let cells = JsArray::from_iter(cells, context);
            object.create_data_property_or_throw(extra.clone(), cells, context)?;
        }
        objects.push(JsValue::from(object));
    }
    Ok(JsArray::from_iter(objects, context).into())
}

/// `stringify(rows, {header, delimiter})`.
pub(super) fn stringify(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let rows = crate::inspect::to_json(&argument(args, 0), context)?;
    let options = options(args, 1, context)?;
    let Value::Array(rows) = rows else {
        return Err(JsNativeError::typ()
            .with_message("kiln:csv stringify takes an array of rows (objects or arrays)")
            .into());
    };
    let mut writer = csv::WriterBuilder::new()
        .flexible(true)
        .delimiter(byte(&options, "delimiter", b',')?)
        .from_writer(Vec::new());
    let objects = rows.iter().any(Value::is_object);
    let mut keys: Vec<String> = Vec::new();
    if objects {
        for row in &rows {
            if let Value::Object(object) = row {
                for key in object.keys() {
                    if !keys.contains(key) {
                        keys.push(key.clone());
                    }
                }
            }
        }
    }
    let failed = |error: csv::Error| {
        JsNativeError::error().with_message(format!("kiln:csv stringify: {error}"))
    };
    if objects && flag(&options, "header", true)? {
        writer.write_record(&keys).map_err(failed)?;
    }
    for (index, row) in rows.iter().enumerate() {
        let cells: Vec<String> = match row {
            Value::Object(object) => keys
                .iter()
                .map(|key| object.get(key).map_or_else(String::new, cell))
                .collect(),
            Value::Array(values) => values.iter().map(cell).collect(),
            other => {
                return Err(JsNativeError::typ()
                    .with_message(format!(
                        "kiln:csv stringify: row {index} is {other}, not an object or an array"
                    ))
                    .into());
            }
        };
        writer.write_record(&cells).map_err(failed)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|error| JsNativeError::error().with_message(error.to_string()))?;
    Ok(JsString::from(String::from_utf8_lossy(&bytes).as_ref()).into())
}
