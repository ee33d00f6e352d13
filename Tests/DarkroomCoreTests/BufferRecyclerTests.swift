import DarkroomTesting
import Foundation
import Testing

@testable import DarkroomCore

@Suite("Buffer recycler", .timeLimit(.minutes(3)))
struct BufferRecyclerTests {
  @Test("a released body's memory serves the next request of its size, and shows only its own bytes")
  func reuse() throws {
    let recycler = BufferRecycler(maxIdleBytes: 4 << 20)
    let first = recycler.allocate(atLeast: 600_000)
    #expect(first.count == 768 << 10)  // 512 KiB and a half
    let address = try #require(first.baseAddress)
    first.initializeMemory(as: UInt8.self, repeating: 0xAB)
    do {
      let bytes = ImageBytes(recycling: first, count: 600_000, to: recycler)
      #expect(bytes.count == 600_000)
      #expect(bytes.withUnsafeBytes { $0.allSatisfy { $0 == 0xAB } })
    }
    #expect(recycler.idleBytes == 768 << 10)
    let second = recycler.allocate(atLeast: 700_000)
    #expect(second.baseAddress == address && second.count == 768 << 10)
    #expect(recycler.idleBytes == 0)
    second.storeBytes(of: 0x01, toByteOffset: 0, as: UInt8.self)
    let small = ImageBytes(recycling: second, count: 1, to: recycler)
    #expect(small.count == 1 && small.data == Data([0x01]))
  }

  @Test("sizes: small and huge requests are plain allocations, freed at once; others round up to a kept size")
  func sizes() {
    let recycler = BufferRecycler(maxIdleBytes: 64 << 20)
    let kiB = 1 << 10
    let miB = 1 << 20
    let cases: [(wanted: Int, given: Int)] = [
      (1, 1), (32 * kiB, 32 * kiB), (32 * kiB + 1, 64 * kiB), (64 * kiB, 64 * kiB), (64 * kiB + 1, 96 * kiB),
      (96 * kiB + 1, 128 * kiB), (5 * miB, 6 * miB), (6 * miB + 1, 8 * miB), (8 * miB, 8 * miB),
      (8 * miB + 1, 8 * miB + 1), (0, 1), (-5, 1),
    ]
    for (wanted, given) in cases {
      let buffer = recycler.allocate(atLeast: wanted)
      #expect(buffer.count == given, "\(wanted) bytes asked")
      recycler.recycle(buffer)
    }
    // Only the kept sizes were kept.
    // (The second request of a size took the buffer the first gave back.)
    let kept = (64 + 96 + 128) * kiB + (6 + 8) * miB
    #expect(recycler.idleBytes == kept)
    #expect(
      BufferRecycler.sizes == BufferRecycler.sizes.sorted() && Set(BufferRecycler.sizes).count == BufferRecycler.sizes.count)
  }

  @Test("a request with no free buffer of its size takes one at most twice as large")
  func largerServes() throws {
    let recycler = BufferRecycler(maxIdleBytes: 16 << 20)
    let twoMiB = recycler.allocate(atLeast: 2 << 20)
    let oneMiB = recycler.allocate(atLeast: 1 << 20)
    recycler.recycle(twoMiB)
    recycler.recycle(oneMiB)
    let medium = recycler.allocate(atLeast: 600_000)  // 768 KiB: the 1 MiB buffer, not the 2 MiB one
    #expect(medium.baseAddress == oneMiB.baseAddress && medium.count == 1 << 20)
    let other = recycler.allocate(atLeast: 600_000)
    #expect(other.baseAddress != twoMiB.baseAddress && other.count == 768 << 10)
    #expect(recycler.idleBytes == 2 << 20)
    for buffer in [medium, other] { recycler.recycle(buffer) }
  }

  @Test("a memory store keeps bytes from a much larger recycled buffer as a copy of their size, and gives the buffer back")
  func memoryStoreCompacts() async throws {
    let recycler = BufferRecycler(maxIdleBytes: 8 << 20)
    let store = MemoryStore(costLimit: 64 << 20)
    func fetched(count: Int, mark: UInt8) -> FetchedData {
      let buffer = recycler.allocate(atLeast: 1 << 20)
      buffer.initializeMemory(as: UInt8.self, repeating: mark)
      let bytes = ImageBytes(recycling: buffer, count: count, to: recycler)
      return FetchedData(source: ImageSource(path: "/a.jpg"), bytes: bytes)
    }
    // 100 KB in a 1 MiB buffer: the store keeps a copy, and the buffer goes back at once.
    try await store.setEntry(CacheEntry(value: fetched(count: 100_000, mark: 7)), forKey: "small", source: "a")
    #expect(recycler.idleBytes == 1 << 20)
    let small = try #require(try await store.entry(forKey: "small")?.value as? FetchedData)
    #expect(small.bytes.count == 100_000 && small.bytes.withUnsafeBytes { $0.allSatisfy { $0 == 7 } })
    // Bytes that fill their buffer are kept as they are: the buffer stays with the store.
    try await store.setEntry(CacheEntry(value: fetched(count: (1 << 20) - 100, mark: 9)), forKey: "full", source: "a")
    #expect(recycler.idleBytes == 0)
    let full = try #require(try await store.entry(forKey: "full")?.value as? FetchedData)
    #expect(full.bytes.count == (1 << 20) - 100 && full.bytes.withUnsafeBytes { $0.last == 9 })
  }

  @Test("idle memory stays within its limit, and trim frees it all")
  func limit() {
    let recycler = BufferRecycler(maxIdleBytes: 1 << 20)
    let buffers = (0..<3).map { _ in recycler.allocate(atLeast: 512 << 10) }
    #expect(Set(buffers.map(\.baseAddress)).count == 3)
    for buffer in buffers { recycler.recycle(buffer) }
    #expect(recycler.idleBytes == 1 << 20)  // two kept, the third freed
    recycler.trim()
    #expect(recycler.idleBytes == 0)
    // A buffer that did not come from a recycler (its size is none of the kept ones) is freed.
    recycler.recycle(.allocate(byteCount: 100_000, alignment: 16))
    #expect(recycler.idleBytes == 0)
  }

  @Test("threads allocating and releasing at once never share a buffer")
  func concurrent() async throws {
    let recycler = BufferRecycler(maxIdleBytes: 8 << 20)
    let problems = try await onOwnThread {
      let failures = Protected(0)
      DispatchQueue.concurrentPerform(iterations: 8) { worker in
        for round in 0..<300 {
          let buffer = recycler.allocate(atLeast: 100_000 + (round % 7) * 50_000)
          let mark = UInt8(truncatingIfNeeded: worker &* 31 &+ round)
          buffer.initializeMemory(as: UInt8.self, repeating: mark)
          let bytes = ImageBytes(recycling: buffer, count: buffer.count, to: recycler)
          // A byte of every page: a buffer handed to two holders at once shows the other's mark.
          let intact = bytes.withUnsafeBytes { raw in
            stride(from: 0, to: raw.count, by: 4096).allSatisfy { raw[$0] == mark } && raw[raw.count - 1] == mark
          }
          if !intact { failures.withLock { $0 += 1 } }
        }
      }
      return failures.value
    }
    #expect(problems == 0)
    #expect(recycler.idleBytes <= 8 << 20)
  }
}
