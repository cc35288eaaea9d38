//! MS-XCA codecs for SMB3 compression: plain LZ77, LZ77+Huffman and LZNT1, sans IO.
#![forbid(unsafe_code)]
