//! The YAML events of a text, from the libyaml parser serde_yaml itself uses: the same
//! tokens, the same line:column marks.
//!
//! serde_yaml reads a whole document into memory before it looks at any of it, and its
//! scanner spends time in proportion to the nesting depth on every token: 100,000 nested
//! brackets took 26 s. Read one event at a time here, a document can be refused as soon
//! as it nests too deep, and the places of many nodes can be found in one pass.

use libyaml_rs as sys;
use std::mem::MaybeUninit;

/// What a pass over the events needs to know of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A scalar, with its text when it is valid UTF-8 (keys are compared by it).
    Scalar(Option<String>),
    SequenceStart,
    SequenceEnd,
    MappingStart,
    MappingEnd,
    Alias,
    /// Stream and document boundaries.
    Boundary,
    /// The end of the stream.
    End,
}

/// A pull parser over `text`. Stops at the first syntax error: serde_yaml reports it.
pub struct Events<'a> {
    /// Boxed because libyaml keeps a pointer to the parser itself (its input handler's
    /// data); it must not move once the input is set.
    parser: Box<MaybeUninit<sys::yaml_parser_t>>,
    _text: &'a str,
    /// `yaml_parser_initialize` succeeded, so `yaml_parser_delete` is owed.
    initialized: bool,
    finished: bool,
}

impl<'a> Events<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut parser = Box::new(MaybeUninit::<sys::yaml_parser_t>::uninit());
        // SAFETY: `yaml_parser_initialize` fills the whole struct before anything reads it;
        // the input outlives the parser (`_text` borrows it for 'a), and the parser does
        // not move (it is boxed) after its input handler keeps a pointer to it.
        unsafe {
            let raw = parser.as_mut_ptr();
            if sys::yaml_parser_initialize(raw).fail {
                // Only an allocation failure; nothing was set up, so nothing to delete.
                return Self {
                    parser,
                    _text: text,
                    initialized: false,
                    finished: true,
                };
            }
            sys::yaml_parser_set_encoding(raw, sys::YAML_UTF8_ENCODING);
            sys::yaml_parser_set_input_string(raw, text.as_ptr(), text.len() as u64);
        }
        Self {
            parser,
            _text: text,
            initialized: true,
            finished: false,
        }
    }

    /// The next event and its 1-based (line, column), or None after the end of the
    /// stream or a syntax error.
    pub fn next_event(&mut self) -> Option<(Event, (usize, usize))> {
        if self.finished {
            return None;
        }
        let mut event = MaybeUninit::<sys::yaml_event_t>::uninit();
        // SAFETY: the parser was initialised in `new` (or `finished` is set); an event that
        // `yaml_parser_parse` filled is read, then deleted exactly once.
        unsafe {
            let parser = self.parser.as_mut_ptr();
            if (&(*parser)).error != sys::YAML_NO_ERROR
                || sys::yaml_parser_parse(parser, event.as_mut_ptr()).fail
            {
                self.finished = true;
                return None;
            }
            let event = event.as_mut_ptr();
            let mark = (*event).start_mark;
            let at = (mark.line as usize + 1, mark.column as usize + 1);
            let converted = match (*event).type_ {
                sys::YAML_SCALAR_EVENT => {
                    let scalar = &(*event).data.scalar;
                    let bytes = std::slice::from_raw_parts(scalar.value, scalar.length as usize);
                    Event::Scalar(std::str::from_utf8(bytes).ok().map(str::to_string))
                }
                sys::YAML_SEQUENCE_START_EVENT => Event::SequenceStart,
                sys::YAML_SEQUENCE_END_EVENT => Event::SequenceEnd,
                sys::YAML_MAPPING_START_EVENT => Event::MappingStart,
                sys::YAML_MAPPING_END_EVENT => Event::MappingEnd,
                sys::YAML_ALIAS_EVENT => Event::Alias,
                sys::YAML_STREAM_END_EVENT => {
                    self.finished = true;
                    Event::End
                }
                _ => Event::Boundary,
            };
            sys::yaml_event_delete(event);
            Some((converted, at))
        }
    }
}

impl Drop for Events<'_> {
    fn drop(&mut self) {
        if self.initialized {
            // SAFETY: the parser was initialised in `new` and is deleted once, here.
            unsafe { sys::yaml_parser_delete(self.parser.as_mut_ptr()) }
        }
    }
}
