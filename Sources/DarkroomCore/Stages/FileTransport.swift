import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Reads local files for the ``Fetcher``: plain paths and `file://` URLs.
///
/// The path is resolved (symlinks included) before the root check, so a link pointing outside
/// the root is refused like a `../` path. The size is checked before reading, and the read stops
/// at `maxBytes` even if the file grows meanwhile. Reading runs on the blocking pool.
public struct FileTransport: FetchTransport {
  public let schemes: Set<String> = ["file"]

  public init() {}

  public func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData {
    guard case .file(let path) = source.location else {
      throw PipelineError(.invalidInput, "\(source) is not a local file", source: source.description)
    }
    return try await context.blocking { try FileTransport.read(path: path, source: source, limits: limits) }
  }

  static func read(path: String, source: ImageSource, limits: FetchLimits) throws -> FetchedData {
    let shown = source.description
    guard !path.isEmpty else { throw PipelineError(.invalidInput, "the source path is empty", source: shown) }
    guard let resolved = realPath(path) else {
      let code: PipelineError.Code = errno == EACCES ? .accessDenied : .notFound
      let reason = code == .notFound ? "does not exist" : "cannot be reached (permission denied)"
      throw PipelineError(code, "\(path) \(reason)", source: shown, cause: posixCause())
    }
    for root in limits.roots {
      guard let resolvedRoot = realPath(root) else {
        throw PipelineError(.accessDenied, "the allowed root \(root) does not exist", source: shown)
      }
      let prefix = resolvedRoot.hasSuffix("/") ? resolvedRoot : resolvedRoot + "/"
      guard resolved.hasPrefix(prefix) else {
        throw PipelineError(
          .accessDenied,
          "\(path) resolves to \(resolved), outside the allowed root \(resolvedRoot): only files inside it may be read",
          source: shown)
      }
    }
    // O_NONBLOCK: opening a FIFO or device must not hang a pool thread (it is refused below);
    // O_NOFOLLOW: the resolved path must not have become a symlink since it was checked.
    let descriptor = open(resolved, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
    guard descriptor >= 0 else {
      let code: PipelineError.Code = errno == EACCES || errno == EPERM ? .accessDenied : .fetchFailed
      throw PipelineError(code, "cannot open \(path): \(String(cString: strerror(errno)))", source: shown, cause: posixCause())
    }
    var keepOpen = false
    defer { if !keepOpen { close(descriptor) } }
    var status = stat()
    guard fstat(descriptor, &status) == 0 else {
      throw PipelineError(.fetchFailed, "cannot inspect \(path)", source: shown, cause: posixCause())
    }
    guard status.st_mode & S_IFMT == S_IFREG else {
      let what = status.st_mode & S_IFMT == S_IFDIR ? "a directory" : "not a regular file"
      throw PipelineError(.invalidInput, "\(path) is \(what); give an image file", source: shown)
    }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    let size = Int(status.st_size)
    if size > limits.maxBytes {
      throw PipelineError(
        .tooLarge, "\(path) is \(size) bytes, over the limit of \(limits.maxBytes) bytes (maxBytes)", source: shown)
    }
    let modified = Date(timeIntervalSince1970: TimeInterval(status.st_mtim.tv_sec))
    if size >= Self.streamingThreshold, ImageBytes.openFiles < ImageBytes.maxOpenFiles {
      // Large files stay in the file: the decoder reads them a little at a time (a 10000×10000
      // JPEG is ~19 MB that memory never needs to hold). The open descriptor keeps reading the
      // file that was checked, whatever happens to its path; at most `size` bytes are read.
      // Past `ImageBytes.maxOpenFiles` such files in flight, files are read into memory.
      keepOpen = true
      let bytes = ImageBytes(openFile: descriptor, count: size)
      return FetchedData(
        source: source, bytes: bytes, contentType: ImageFormat.sniff(bytes.prefix(64))?.mimeType, lastModified: modified,
        metadata: ["path": resolved, "size": String(size)])
    }
    let capacity = min(size, limits.maxBytes) + 1
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
    var filled = 0
    while filled < capacity {
      let count = Glibc.read(descriptor, buffer.baseAddress! + filled, capacity - filled)
      if count < 0 {
        if errno == EINTR { continue }
        buffer.deallocate()
        throw PipelineError(
          .fetchFailed, "reading \(path) failed: \(String(cString: strerror(errno)))", source: shown, cause: posixCause())
      }
      if count == 0 { break }
      filled += count
    }
    if filled > limits.maxBytes {
      buffer.deallocate()
      throw PipelineError(
        .tooLarge, "\(path) grew past the limit of \(limits.maxBytes) bytes (maxBytes) while it was read", source: shown)
    }
    let bytes = ImageBytes(adopting: UnsafeMutableRawBufferPointer(start: buffer.baseAddress, count: filled))
    return FetchedData(
      source: source, bytes: bytes, contentType: ImageFormat.sniff(bytes.prefix(64))?.mimeType, lastModified: modified,
      metadata: ["path": resolved, "size": String(filled)])
  }

  /// Files at least this large (1 MiB) are read by the decoder from the file, not into memory.
  public static let streamingThreshold = 1 << 20

  static func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
  }

  static func posixCause() -> LibraryMessage {
    LibraryMessage(library: "posix", text: String(cString: strerror(errno)))
  }
}
