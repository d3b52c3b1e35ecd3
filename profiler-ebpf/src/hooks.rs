//! Timed kernel functions: `HOOK_SLOTS` fentry/fexit pairs, each bound to one function at load
//! time (a `security_*` hook, an LSM's own hook function, or a task path). Entry pushes a frame
//! (slot, start) on the task's own stack; exit pops it only if the top frame is its own slot.
//! A full stack or an exit that does not match is counted (untimed), never timed.
//!
//! A pair makes the fewest helper calls it can: each side looks up the task's state once
//! (current task, its storage) and reads the clock once, and only the exit touches the slot's
//! tally, counting the call together with its duration.
use core::ffi::c_void;

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::{fentry, fexit},
    programs::{FEntryContext, FExitContext},
    Global,
};
use aya_log_ebpf::warn;
use profiler_common::event;

use crate::{
    maps::{add_duration, count_call, count_event, entered_in_an_earlier_window, Path},
    task_state::{self, MAX_DEPTH},
};

/// Set at load when only the entries are loaded (the discovery pass, which needs call counts
/// and no times): no exit will come, so the entry counts the call and pushes nothing.
#[unsafe(no_mangle)]
static ENTRIES_ONLY: Global<u32> = Global::new(0);

/// `ctx` is only handed to the log, which does not read it.
#[inline(always)]
fn hook_enter(ctx: *mut c_void, slot: u32) {
    let Some(state) = task_state::entering() else {
        return;
    };
    if ENTRIES_ONLY.load() != 0 {
        count_call(Path::Hook(slot));
        return;
    }
    // Counted even when the stack is full: this call's probes still run inside its callers.
    state.entries += 1;
    let (depth, entries) = (state.depth as usize, state.entries);
    let Some(frame) = state.frame(depth) else {
        state.overflowed += 1;
        // Its exit will not be timed, so the call is counted here.
        count_call(Path::Hook(slot));
        count_event(event::STACK_FULL);
        warn!(
            ctx,
            "hook slot {} entered with {} timed calls open: counted, not timed", slot, MAX_DEPTH
        );
        return;
    };
    frame.slot = slot;
    frame.entries = entries;
    let start_ns: *mut u64 = &mut frame.start_ns;
    state.depth = depth as u32 + 1;
    // Last, so the time this program spent before it is not the function's.
    unsafe { *start_ns = bpf_ktime_get_ns() };
}

#[inline(always)]
fn hook_exit(ctx: *mut c_void, slot: u32) {
    let Some(state) = task_state::current() else {
        return;
    };
    if state.overflowed > 0 {
        // The innermost calls exit first: this is one that found the stack full (counted then).
        state.overflowed -= 1;
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let depth = state.depth as usize;
    let (start_ns, entries) = match state.frame(depth.wrapping_sub(1)) {
        Some(f) if f.slot == slot => (f.start_ns, f.entries),
        // Its entry was never seen (attached mid-call) or another frame is on top.
        _ => {
            count_call(Path::Hook(slot));
            count_event(event::UNMATCHED_EXIT);
            warn!(
                ctx,
                "exit of hook slot {} does not match its task's innermost open call: counted, \
                 not timed",
                slot
            );
            return;
        }
    };
    state.depth = depth as u32 - 1;
    if entered_in_an_earlier_window(start_ns) {
        count_call(Path::Hook(slot));
        count_event(event::STALE_EXIT);
        return;
    }
    let nested = state.entries.wrapping_sub(entries);
    add_duration(Path::Hook(slot), 1, now.wrapping_sub(start_ns), nested, 0);
}

/// Empty pair: the floor that calibration compares a timed pair against.
#[fentry(function = "security_file_open")]
pub fn empty_enter(_ctx: FEntryContext) -> u32 {
    0
}

#[fexit(function = "security_file_open")]
pub fn empty_exit(_ctx: FExitContext) -> u32 {
    0
}
/// Each slot's programs sit in ELF sections of their own (the function is named at load time,
/// not by the section): aya gives every program a copy of its whole section's line info, which
/// for all the slots in one section came to over 100 MB of the profiler's memory.
macro_rules! hook_slots {
    ($($slot:literal)*) => { paste::paste! { $(
        #[unsafe(no_mangle)]
        #[unsafe(link_section = concat!("fentry/hook_enter_", $slot))]
        pub fn [<hook_enter_ $slot>](ctx: *mut c_void) -> i32 {
            hook_enter(ctx, $slot);
            0
        }
        #[unsafe(no_mangle)]
        #[unsafe(link_section = concat!("fexit/hook_exit_", $slot))]
        pub fn [<hook_exit_ $slot>](ctx: *mut c_void) -> i32 {
            hook_exit(ctx, $slot);
            0
        }
    )* } };
}

hook_slots!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
    20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39
    40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59
    60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
    80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99
    100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119
    120 121 122 123 124 125 126 127 128 129 130 131 132 133 134 135 136 137 138 139
    140 141 142 143 144 145 146 147 148 149 150 151 152 153 154 155 156 157 158 159
    160 161 162 163 164 165 166 167 168 169 170 171 172 173 174 175 176 177 178 179
    180 181 182 183 184 185 186 187 188 189 190 191 192 193 194 195 196 197 198 199
    200 201 202 203 204 205 206 207 208 209 210 211 212 213 214 215 216 217 218 219
    220 221 222 223 224 225 226 227 228 229 230 231 232 233 234 235 236 237 238 239
    240 241 242 243 244 245 246 247 248 249 250 251 252 253 254 255 256 257 258 259
    260 261 262 263 264 265 266 267 268 269 270 271 272 273 274 275 276 277 278 279
    280 281 282 283 284 285 286 287 288 289 290 291 292 293 294 295 296 297 298 299
    300 301 302 303 304 305 306 307 308 309 310 311 312 313 314 315 316 317 318 319
    320 321 322 323 324 325 326 327 328 329 330 331 332 333 334 335 336 337 338 339
    340 341 342 343 344 345 346 347 348 349 350 351 352 353 354 355 356 357 358 359
    360 361 362 363 364 365 366 367 368 369 370 371 372 373 374 375 376 377 378 379
    380 381 382 383
);
