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
    let descriptor = try openRegularFile(path)
    defer { close(descriptor) }
    return try read(descriptor: descriptor, limit: limit)
  }

  /// Opens the regular file at `path` for blocking reads (the open itself never blocks, and a
  /// FIFO or a device is refused); the caller closes the descriptor.
  package static func openRegularFile(_ path: String) throws(Failure) -> Int32 {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard descriptor >= 0 else { throw .system(errno) }
    var status = stat()
    guard fstat(descriptor, &status) == 0 else {
      let code = errno
      close(descriptor)
      throw .system(code)
    }
    guard status.st_mode & S_IFMT == S_IFREG else {
      close(descriptor)
      throw .notRegular
    }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    return descriptor
  }

  /// Reads `descriptor` to its end (standard input, say), at most `limit` bytes.
  package static func read(descriptor: Int32, limit: Int) throws(Failure) -> Data {
    var data = Data()
    try readChunks(descriptor: descriptor, limit: limit) { chunk in
      data.append(contentsOf: chunk)
      return true
    }
    return data
  }

  /// Reads `descriptor` to its end in chunks of at most 64 KiB, handing each to `body` as it
  /// arrives, so nothing but the chunk is held; `body` returns `false` to stop reading. More than
  /// `limit` bytes in all is `tooLarge` (what came before was handed over). When `interrupt` (a
  /// descriptor) becomes readable, reading stops and `true` is returned: a pipe that a signal
  /// writes to ends the wait for a writer that never writes or closes.
  @discardableResult
  package static func readChunks(
    descriptor: Int32, limit: Int, interrupt: Int32? = nil, _ body: (UnsafeRawBufferPointer) -> Bool
  ) throws(Failure) -> Bool {
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    var total = 0
    while true {
      if let interrupt {
        var waits = [
          pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0), pollfd(fd: interrupt, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&waits, 2, -1)
        if ready < 0 {
          if errno == EINTR { continue }
          throw .system(errno)
        }
        if waits[1].revents != 0 { return true }
      }
      let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
      if count < 0 {
        if errno == EINTR { continue }
        throw .system(errno)
      }
      if count == 0 { return false }
      total += count
      if total > limit { throw .tooLarge }
      let goOn = chunk.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
      if !goOn { return false }
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
