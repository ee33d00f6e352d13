/// Large byte buffers kept for the next image: the memory of bytes that were written or decoded
/// serves the next download or file read without new page faults.
///
/// glibc hands allocations of this size straight from `mmap` and gives them back with `munmap`, so
/// every new 600 KB body was 150 fresh pages, each faulted in and zeroed by the kernel as the bytes
/// arrived: a tenth of a fetch-only run's CPU (2026-11-28). Buffers from 64 KiB to 8 MiB are
/// rounded up to a power of two or one and a half times one (a third wasted at most, which stays
/// untouched and costs no memory until a larger body fills it) and, when freed, kept for the next
/// request of their size, up to
/// ``maxIdleBytes`` in all; beyond that, and outside those sizes, memory goes back to the system
/// at once. ``ImageBytes/init(recycling:count:)`` gives a buffer back when its last holder goes.
///
/// ```swift
/// let buffer = BufferRecycler.shared.allocate(atLeast: 600_000)   // 1 MiB, perhaps used before
/// let bytes = ImageBytes(recycling: buffer, count: 600_000)       // given back when released
/// ```
package final class BufferRecycler: Sendable {
  /// The recycler every download and file read uses: 16 MiB of idle buffers at most.
  package static let shared = BufferRecycler(maxIdleBytes: 16 << 20)

  /// The smallest and largest buffers kept; between them, powers of two and one and a half
  /// times them.
  package static let smallestKept = 64 << 10
  package static let largestKept = 8 << 20
  private static let alignment = 16

  /// The sizes kept, smallest first.
  package static let sizes: [Int] = {
    var sizes: [Int] = []
    var power = smallestKept
    while power <= largestKept {
      sizes.append(power)
      if power + power / 2 < largestKept { sizes.append(power + power / 2) }
      power *= 2
    }
    return sizes
  }()

  /// The most bytes kept idle at once.
  package let maxIdleBytes: Int
  private let idle = Protected(Idle())

  private struct Idle {
    /// Free buffers by size class (their index in ``BufferRecycler/sizes``), as addresses.
    var free: [[UInt]] = Array(repeating: [], count: BufferRecycler.sizes.count)
    var bytes = 0
  }

  package init(maxIdleBytes: Int) {
    self.maxIdleBytes = max(0, maxIdleBytes)
  }

  /// The idle buffers go with the recycler (the `ImageBytes` made on its buffers hold it, so none
  /// is still out).
  deinit { trim() }

  /// Bytes held idle now.
  package var idleBytes: Int { idle.withLock { $0.bytes } }

  /// A buffer of at least `count` bytes (its `count` is its whole capacity): one kept from before
  /// when there is one of its size or at most twice as large, a new one otherwise. Give it back with ``recycle(_:)`` (or through ``ImageBytes``).
  package func allocate(atLeast count: Int) -> UnsafeMutableRawBufferPointer {
    let wanted = max(count, 1)
    guard let sizeClass = Self.sizeClass(of: wanted) else {
      return .allocate(byteCount: wanted, alignment: Self.alignment)
    }
    // A buffer of this size, or of the next two (twice the size at most) when there is none.
    let kept = idle.withLock { idle -> (address: UInt, size: Int)? in
      for larger in sizeClass..<min(sizeClass + 3, Self.sizes.count) {
        guard let address = idle.free[larger].popLast() else { continue }
        idle.bytes -= Self.sizes[larger]
        return (address, Self.sizes[larger])
      }
      return nil
    }
    if let kept, let start = UnsafeMutableRawPointer(bitPattern: kept.address) {
      return UnsafeMutableRawBufferPointer(start: start, count: kept.size)
    }
    return .allocate(byteCount: Self.sizes[sizeClass], alignment: Self.alignment)
  }

  /// Takes back a buffer from ``allocate(atLeast:)`` (its full `count`): kept for the next request
  /// of its size while the idle total stays within ``maxIdleBytes``, freed otherwise.
  package func recycle(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let start = buffer.baseAddress else { return }
    let size = buffer.count
    guard let sizeClass = Self.sizeClass(of: size), Self.sizes[sizeClass] == size else {
      buffer.deallocate()
      return
    }
    let kept = idle.withLock { idle -> Bool in
      guard idle.bytes + size <= maxIdleBytes else { return false }
      idle.free[sizeClass].append(UInt(bitPattern: start))
      idle.bytes += size
      return true
    }
    if !kept { buffer.deallocate() }
  }

  /// Frees every idle buffer (on memory pressure, say).
  package func trim() {
    let addresses = idle.withLock { idle -> [UInt] in
      defer {
        idle.free = Array(repeating: [], count: Self.sizes.count)
        idle.bytes = 0
      }
      return idle.free.flatMap { $0 }
    }
    for address in addresses { UnsafeMutableRawPointer(bitPattern: address)?.deallocate() }
  }

  /// The size class holding `count` bytes (the smallest kept size as large), or nil outside the
  /// kept sizes.
  private static func sizeClass(of count: Int) -> Int? {
    guard count > smallestKept / 2, count <= largestKept else { return nil }
    return sizes.firstIndex { $0 >= count }
  }
}
