import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Whole reads and writes on a file descriptor with the system calls themselves, which report a
/// failure instead of trapping (as `FileHandle.write(_:)` does), retrying after interrupts and
/// short transfers. The runner's terminal lines, the JSON Lines sink, atomic outputs, disk-cache
/// entries, image tables and streamed files all go through these.
package enum DescriptorIO {
  /// Writes all of `bytes` to `descriptor` at its offset; `nil` when everything was written,
  /// otherwise the `errno` of the failed write (the rest is not written).
  package static func writeAll(_ descriptor: Int32, _ bytes: some ContiguousBytes) -> Int32? {
    bytes.withUnsafeBytes { buffer in
      var done = 0
      while done < buffer.count, let base = buffer.baseAddress {
        let count = write(descriptor, base + done, buffer.count - done)
        if count < 0 {
          if errno == EINTR { continue }
          return errno
        }
        done += count
      }
      return nil
    }
  }

  /// Writes all of `bytes` at `offset`; `nil`, or the `errno` of the failure (`ENOSPC` for a
  /// write that stopped short on a full disk).
  package static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int32? {
    var done = 0
    while done < bytes.count, let base = bytes.baseAddress {
      let count = pwrite(descriptor, base + done, bytes.count - done, off_t(offset + done))
      if count < 0 {
        if errno == EINTR { continue }
        return errno
      }
      if count == 0 { return ENOSPC }
      done += count
    }
    return nil
  }

  /// Reads up to `buffer.count` bytes at `offset`; the count read (fewer at the end of the file),
  /// or -1 with `errno` set.
  package static func readAll(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
    var done = 0
    while done < buffer.count, let base = buffer.baseAddress {
      let count = pread(descriptor, base + done, buffer.count - done, off_t(offset + done))
      if count < 0 {
        if errno == EINTR { continue }
        return -1
      }
      if count == 0 { break }
      done += count
    }
    return done
  }
}
