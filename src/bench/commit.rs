//! `quill bench commit` (to come).
