//! TODO(module)
