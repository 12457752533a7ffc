//! Tests.
use super::*;
