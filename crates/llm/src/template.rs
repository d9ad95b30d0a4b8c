//! The model's own chat template: the Jinja text in the GGUF's
//! `tokenizer.chat_template`, rendered with minijinja under a fuel bound (the
//! template is a file's content, so a looping one ends with an error).

use minijinja::{Environment, Error, ErrorKind, context};
use serde::Serialize;
use tokenizers::Tokenizer;

use crate::LlmError;

/// Markers that end a turn in the chat formats we know; the one the template
/// writes is a stop token beside the GGUF's end-of-sequence token.
const END_OF_TURN_MARKERS: [&str; 3] = ["<|im_end|>", "<|eot_id|>", "<|end|>"];

/// How much work one rendering may do: plenty for any real conversation.
const FUEL: u64 = 5_000_000;

/// One message as chat templates read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TemplateMessage {
    pub role: &'static str,
    pub content: String,
}

pub(crate) struct Template {
    source: String,
    bos_token: String,
    eos_token: String,
}

impl Template {
    pub(crate) fn new(source: String, tokenizer: &Tokenizer) -> Result<Self, LlmError> {
        let template = Self {
            source,
            bos_token: String::new(),
            eos_token: String::new(),
        };
        // Parsed once here, so that a template that cannot parse fails the load
        // rather than the first turn.
        template.environment().map_err(template_error)?;
        let special = |markers: &[&str]| {
            markers
                .iter()
                .find(|marker| tokenizer.token_to_id(marker).is_some())
                .map(|marker| (*marker).to_owned())
                .unwrap_or_default()
        };
        Ok(Self {
            bos_token: special(&["<|im_start|>", "<s>", "<|begin_of_text|>"]),
            eos_token: special(&["<|im_end|>", "</s>", "<|endoftext|>"]),
            ..template
        })
    }

    fn environment(&self) -> Result<Environment<'_>, Error> {
        let mut environment = Environment::new();
        environment.set_fuel(Some(FUEL));
        environment.add_function(
            "raise_exception",
            |message: String| -> Result<String, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        environment.add_template("chat", &self.source)?;
        Ok(environment)
    }

    /// The prompt for `messages`, ending where the assistant's reply begins.
    pub(crate) fn render(&self, messages: &[TemplateMessage]) -> Result<String, LlmError> {
        let environment = self.environment().map_err(template_error)?;
        let template = environment.get_template("chat").map_err(template_error)?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => &self.bos_token,
                eos_token => &self.eos_token,
            })
            .map_err(template_error)
    }

    /// The end-of-turn marker the template writes, as a token id.
    pub(crate) fn end_of_turn_token(&self, tokenizer: &Tokenizer) -> Option<u32> {
        END_OF_TURN_MARKERS
            .iter()
            .filter(|marker| self.source.contains(*marker))
            .find_map(|marker| tokenizer.token_to_id(marker))
    }
}

fn template_error(error: Error) -> LlmError {
    LlmError::Template(error.to_string())
}
