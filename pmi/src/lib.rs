//! PMI-1
