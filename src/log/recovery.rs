//! The recovery scan: from the checkpoint LSN forward, hand every complete
//! logical record to a callback, and stop cleanly at the first fragment that
//! does not follow.
//!
//! A fragment at position `p` is accepted only if all of these hold; the
//! first failure ends the log there (its [`StopReason`] is reported):
//!
//! 1. its stored LSN equals `p` (rejects zeros, garbage, and stale records
//!    from the previous lap of the circle, whose LSN is `p - capacity`);
//! 2. its kind is known, its length within the format bound and its
//!    durability hint within reach;
//! 3. its epoch is at most the checkpoint slot's epoch and at least the
//!    previous accepted fragment's epoch;
//! 4. its CRC-32C matches (header tail, payload, LSN);
//! 5. fragments of one logical record come in order (`First`, `Middle`*,
//!    `Last`) with one record type. Checkpoints are only ever taken at
//!    record boundaries (writer I4), so a `Middle`/`Last` fragment right at
//!    the checkpoint is damage too.
//!
//! Why rule 3 makes the end unique: every open makes a bumped epoch durable
//! (in a checkpoint slot) before it appends, and appends continue at the end
//! this scan found. A fragment a crash left *beyond* that end (an unsynced
//! write that survived while an earlier one did not) carries an older epoch
//! than anything a later generation writes before it, so if later appends
//! ever reach its position, the scan stops at it instead of resurrecting it.
//! And a fragment at the found end itself failed the checks, so it still
//! fails them until a newer generation overwrites it.
//!
//! The scan never reads past `checkpoint + capacity`, where the circle would
//! wrap onto the checkpoint itself.
//!
//! Damage versus a torn end (rule 6, the reason open refuses a log rather
//! than dropping what follows the stop): a crash only loses, keeps or tears
//! writes that no completed sync covers, so a stop below any point the log
//! is known to have been durable up to is damage. Known from two places:
//! the checkpoint slot's durable LSN (made durable with the slot), and the
//! durability hint of every valid fragment after the stop (`format.rs`),
//! searched for at every 8-byte position up to [`format::HINT_REACH`]
//! bytes on (further on, no hint can reach back). A fragment counts if its
//! stored LSN is its position, its header is plausible, its epoch is the
//! slot's (the generation of the last open), and its CRC matches. Damage
//! that no later fragment and no slot can prove (the last few records
//! before the end of the log) is indistinguishable from a torn end and ends
//! the log there.
//!
//! Why such a claim is true (recovery I1): a hint claims only up to a
//! durable *record boundary* (`append.rs`), and durable complete records
//! are never rewritten: every open continues at the end of the last
//! complete record its scan found, which is at or past every boundary that
//! was durable. What a later generation does rewrite are the fragments of
//! a record the scan could not complete, even durable ones (a sync may
//! cover the first fragments of a record still being appended), and
//! whatever a crash left beyond them. So a fragment of an older generation
//! than the slot's may describe contents since replaced, and proves
//! nothing; nor is it needed: every open writes a slot claiming the end it
//! found before it appends, and the generation's later slots claim more,
//! so any true claim of an older generation is at or below the slot's own.
//! (Logs from builds whose hints claimed bytes inside a record, which
//! could reach into a rewritten one, open too.)

use super::files::LogFiles;
use super::format::{self, BLOCK, CheckpointSlot, FragmentKind, RECORD_HEADER, RecordHeader};
use crate::io::AlignedBuf;
use crate::{Lsn, Result};

/// A logical record found by recovery.
#[derive(Debug)]
pub struct RecoveredRecord<'a> {
    /// LSN of its first fragment.
    pub lsn: Lsn,
    /// LSN just past its last fragment (what `append` returned for it).
    pub end: Lsn,
    /// The record type given to `append`.
    pub rtype: u8,
    /// The payload.
    pub payload: &'a [u8],
}

/// Why the scan ended where it did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StopReason {
    /// An all-zero header: the log simply ends (never written, or padding).
    Clean,
    /// The header's LSN is not the position (stale or garbage bytes).
    LsnMismatch {
        /// LSN found in the header.
        found: u64,
    },
    /// Structurally impossible header (kind, length or reserved bits).
    Malformed,
    /// Epoch older than the previous fragment's or newer than the slot's.
    Epoch {
        /// Epoch found.
        found: u32,
    },
    /// CRC mismatch: a torn or damaged fragment.
    Checksum,
    /// Fragments of a logical record out of order.
    FragmentOrder,
    /// The scan reached `checkpoint + capacity`.
    Capacity,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Clean => f.write_str("zeros where a record header should be"),
            StopReason::LsnMismatch { found } => {
                write!(f, "a header naming LSN {found}, not its position")
            }
            StopReason::Malformed => f.write_str("an impossible record header"),
            StopReason::Epoch { found } => write!(f, "a record of an out-of-order epoch {found}"),
            StopReason::Checksum => f.write_str("a record that fails its checksum"),
            StopReason::FragmentOrder => f.write_str("fragments of a record out of order"),
            StopReason::Capacity => f.write_str("the scan went once around the log"),
        }
    }
}

/// Proof that a scan's stop is damage to durable log, not a torn end.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Damage {
    /// The LSN the log is known to have been durable up to, beyond the stop.
    pub durable_lsn: u64,
    /// What says so: the LSN of a later fragment whose durability hint
    /// claims it, or `None` for the checkpoint slot's durable LSN.
    pub claimed_by: Option<u64>,
}

/// What a scan found.
#[derive(Debug)]
pub(crate) struct ScanOutcome {
    /// End of the last complete logical record.
    pub end: u64,
    /// Complete logical records found.
    pub records: u64,
    /// Their payload bytes.
    pub payload_bytes: u64,
    /// Why it stopped.
    pub stop: StopReason,
    /// Where the stop was detected (>= end when a partial record was dropped).
    pub stop_lsn: u64,
    /// Bytes `[block_floor(end), end)`, to seed the ring's tail block.
    pub tail: Vec<u8>,
    /// Set when the stop is provably damage (rule 6).
    pub damage: Option<Damage>,
}

/// Sequential reader of the log stream by LSN, through an aligned window.
struct Window<'a> {
    files: &'a LogFiles,
    buf: AlignedBuf,
    start: u64,
    len: usize,
}

impl<'a> Window<'a> {
    fn new(files: &'a LogFiles) -> Self {
        let size = (4usize << 20).min(files.capacity() as usize);
        Window {
            files,
            buf: AlignedBuf::new(size),
            start: 0,
            len: 0,
        }
    }

    /// Bytes `[lsn, lsn + n)`, reading the window again around `lsn` when
    /// they are not in it (W1: afterwards the window holds them).
    fn get(&mut self, lsn: u64, n: usize) -> Result<&[u8]> {
        let end = lsn + n as u64;
        if lsn < self.start || end > self.start + self.len as u64 {
            let from = format::block_floor(lsn);
            let want = format::block_ceil(end) - from;
            if want > self.buf.len() as u64 {
                self.buf = AlignedBuf::new(want as usize);
            }
            self.files.read(from, &mut self.buf)?;
            self.start = from;
            self.len = self.buf.len();
        }
        let lo = (lsn - self.start) as usize;
        assert!(
            lo + n <= self.len,
            "recovery W1: the window holds what get returns"
        );
        #[allow(clippy::indexing_slicing)] // W1, asserted above
        Ok(&self.buf[lo..lo + n])
    }
}

struct Partial {
    start: u64,
    rtype: u8,
    data: Vec<u8>,
}

/// The fragment at `p` if it passes rules 1 to 4: its header, and the
/// payload with its CRC verified.
fn valid_fragment<'w>(
    win: &'w mut Window<'_>,
    p: u64,
    slot_epoch: u32,
    limit: u64,
) -> Result<Result<(RecordHeader, &'w [u8]), StopReason>> {
    let mut raw = [0u8; RECORD_HEADER];
    raw.copy_from_slice(win.get(p, RECORD_HEADER)?);
    if raw.iter().all(|&b| b == 0) {
        return Ok(Err(StopReason::Clean));
    }
    let h = RecordHeader::decode(&raw);
    if h.lsn != p {
        return Ok(Err(StopReason::LsnMismatch { found: h.lsn }));
    }
    if !h.plausible() {
        return Ok(Err(StopReason::Malformed));
    }
    if h.epoch > slot_epoch {
        return Ok(Err(StopReason::Epoch { found: h.epoch }));
    }
    let size = h.size();
    if p + size > limit {
        return Ok(Err(StopReason::Capacity));
    }
    let frag = win.get(p, size as usize)?;
    let (head, rest) = frag.split_at(RECORD_HEADER.min(frag.len()));
    let mut tail = [0u8; 12];
    if let Some(t) = head.get(12..RECORD_HEADER) {
        tail.copy_from_slice(t);
    }
    // The hint's bytes count as zero in the CRC's first part (format.rs).
    tail[10] = 0;
    tail[11] = 0;
    let Some(body) = rest.get(..h.len as usize) else {
        return Ok(Err(StopReason::Malformed));
    };
    if format::crc_finish(format::crc_begin(&tail, body), p, h.hint) != h.crc {
        return Ok(Err(StopReason::Checksum));
    }
    Ok(Ok((h, body)))
}

/// Rule 6: whether the log is known to have been durable past `stop`.
/// Only the slot and fragments of the slot's generation say (recovery I1).
fn find_damage(
    win: &mut Window<'_>,
    stop: u64,
    slot: &CheckpointSlot,
    limit: u64,
) -> Result<Option<Damage>> {
    if slot.durable_lsn.0 > stop {
        return Ok(Some(Damage {
            durable_lsn: slot.durable_lsn.0,
            claimed_by: None,
        }));
    }
    let end = limit.min(stop.saturating_add(format::HINT_REACH));
    // A fragment's first word is its own LSN (rule 1): find the positions
    // where that holds a chunk at a time, then check those few in full.
    const CHUNK: u64 = 1 << 20;
    let mut q = stop + 8;
    while q + RECORD_HEADER as u64 <= end {
        let chunk_end = (q + CHUNK).min(end);
        let candidates: Vec<u64> = win
            .get(q, (chunk_end - q) as usize)?
            .chunks_exact(8)
            .zip((q..).step_by(8))
            .filter(|(word, at)| word == &at.to_le_bytes().as_slice())
            .map(|(_, at)| at)
            .collect();
        for at in candidates {
            if let Ok((h, _)) = valid_fragment(win, at, slot.epoch, limit)?
                && h.epoch == slot.epoch
                && let Some(claim) = h.claim(at)
                && claim > stop
            {
                return Ok(Some(Damage {
                    durable_lsn: claim,
                    claimed_by: Some(at),
                }));
            }
        }
        q = chunk_end;
    }
    Ok(None)
}

/// Scan from the checkpoint of `slot`, calling `on_record` for each
/// complete logical record, then check the stop (rule 6).
pub(crate) fn scan(
    files: &LogFiles,
    slot: &CheckpointSlot,
    on_record: &mut dyn FnMut(&RecoveredRecord<'_>) -> Result<()>,
) -> Result<ScanOutcome> {
    let from = slot.checkpoint_lsn.0;
    let slot_epoch = slot.epoch;
    let limit = from + files.capacity();
    let mut win = Window::new(files);
    let mut p = from;
    let mut last_epoch = 0u32;
    let mut partial: Option<Partial> = None;
    let mut records = 0u64;
    let mut payload_bytes = 0u64;
    let stop = loop {
        if p + RECORD_HEADER as u64 > limit {
            break StopReason::Capacity;
        }
        let (h, body) = match valid_fragment(&mut win, p, slot_epoch, limit)? {
            Ok(found) => found,
            Err(reason) => break reason,
        };
        if h.epoch < last_epoch {
            break StopReason::Epoch { found: h.epoch };
        }
        let Some(kind) = h.kind() else {
            break StopReason::Malformed;
        };
        let size = h.size();
        let end = p + size;
        match (kind, partial.as_mut()) {
            (FragmentKind::Full, None) => {
                on_record(&RecoveredRecord {
                    lsn: Lsn(p),
                    end: Lsn(end),
                    rtype: h.rtype,
                    payload: body,
                })?;
                records += 1;
                payload_bytes += body.len() as u64;
            }
            (FragmentKind::First, None) => {
                partial = Some(Partial {
                    start: p,
                    rtype: h.rtype,
                    data: body.to_vec(),
                });
            }
            (FragmentKind::Middle, Some(part)) if part.rtype == h.rtype => {
                part.data.extend_from_slice(body);
            }
            (FragmentKind::Last, Some(part)) if part.rtype == h.rtype => {
                part.data.extend_from_slice(body);
                on_record(&RecoveredRecord {
                    lsn: Lsn(part.start),
                    end: Lsn(end),
                    rtype: part.rtype,
                    payload: &part.data,
                })?;
                records += 1;
                payload_bytes += part.data.len() as u64;
                partial = None;
            }
            _ => break StopReason::FragmentOrder,
        }
        last_epoch = h.epoch;
        p = end;
    };
    let end = partial.as_ref().map_or(p, |part| part.start);
    debug_assert!(
        from <= end && end <= p && p <= limit,
        "recovery: the end is a record boundary at or before the stop, within one lap"
    );
    let damage = match stop {
        StopReason::Capacity => None,
        _ => find_damage(&mut win, p, slot, limit)?,
    };
    let tail_start = format::block_floor(end);
    let tail = win.get(tail_start, (end - tail_start) as usize)?.to_vec();
    debug_assert!(tail.len() < BLOCK as usize);
    Ok(ScanOutcome {
        end,
        records,
        payload_bytes,
        stop,
        stop_lsn: p,
        tail,
        damage,
    })
}
