import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Reads a small file whole, bounded: only a regular file is read (a FIFO or a device is refused
/// instead of read for ever, and never blocks the open), and at most `limit` bytes, whatever the
/// file's size said when it was opened. Pipeline files and input lists are read this way.
package enum BoundedFileReader {
  package enum Failure: Error, Equatable {
    /// The file cannot be opened or read (`errno`).
    case system(Int32)
    /// Not a regular file.
    case notRegular
    /// More than the limit.
    case tooLarge
  }

  /// The bytes of the regular file at `path`, at most `limit` of them.
  package static func read(_ path: String, limit: Int) throws(Failure) -> Data {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard descriptor >= 0 else { throw .system(errno) }
    defer { close(descriptor) }
    var status = stat()
    guard fstat(descriptor, &status) == 0 else { throw .system(errno) }
    guard status.st_mode & S_IFMT == S_IFREG else { throw .notRegular }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    return try read(descriptor: descriptor, limit: limit)
  }

  /// Reads `descriptor` to its end (standard input, say), at most `limit` bytes.
  package static func read(descriptor: Int32, limit: Int) throws(Failure) -> Data {
    var data = Data()
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
      let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
      if count < 0 {
        if errno == EINTR { continue }
        throw .system(errno)
      }
      if count == 0 { return data }
      data.append(contentsOf: chunk[0..<count])
      if data.count > limit { throw .tooLarge }
    }
  }
}

extension BoundedFileReader.Failure: CustomStringConvertible {
  package var description: String {
    switch self {
    case .system(let code): String(cString: strerror(code))
    case .notRegular: "it is not a regular file"
    case .tooLarge: "it is too large"
    }
  }
}
