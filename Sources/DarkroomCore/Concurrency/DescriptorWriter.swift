import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Writes to a file descriptor with `write(2)`, which reports a failure instead of trapping (as
/// `FileHandle.write(_:)` does): the runner's terminal lines and the JSON Lines sink use it.
package enum DescriptorWriter {
  /// Writes all of `bytes` to `descriptor`, retrying after interrupts; `nil` when everything was
  /// written, otherwise the `errno` of the failed write (the rest is not written).
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
}
