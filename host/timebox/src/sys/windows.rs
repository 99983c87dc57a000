//! Process trees on Windows: each run starts suspended, is put in a Job
//! Object of its own with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE` (breakaway
//! not allowed), and only then resumed, so every process it ever starts is
//! in the job. Ending the run terminates the job; when the host dies,
//! Windows closes the job's handle and kills the tree (what the watchdog
//! does on Linux).

use std::process::ExitStatus;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED, GetProcessTimes, OpenProcess, OpenThread,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SET_QUOTA, PROCESS_TERMINATE, ResumeThread,
    THREAD_SUSPEND_RESUME,
};

use crate::KillReport;

/// One run's process tree: its job.
pub struct Tree {
    job: Job,
}

/// An owned Job Object handle; closing it kills what is left in the job.
struct Job(HANDLE);

// SAFETY: a job handle may be used and closed from any thread.
unsafe impl Send for Job {}
unsafe impl Sync for Job {}

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and closed once.
        unsafe { CloseHandle(self.0) };
    }
}

/// A batch file (`npm.cmd`) runs through cmd.exe, which std quotes every
/// argument for (the BatBadBut rules); what no quoting protects is refused
/// here with a message that says why: a line break ends cmd's command, and
/// `%NAME%` is expanded even inside quotes (std's escape for it relies on
/// cmd's extensions, which not every cmd.exe has: Wine's expands it), so
/// a variable holding `"&...` would start another program.
pub fn check_args(program: &std::path::Path, args: &[String]) -> std::io::Result<()> {
    let batch = program
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("cmd") || e.eq_ignore_ascii_case("bat"));
    if !batch {
        return Ok(());
    }
    match args
        .iter()
        .position(|a| a.contains(['%', '\r', '\n', '\0']))
    {
        None => Ok(()),
        Some(i) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "argument {} ({:?}) holds a `%` or a line break, which cmd.exe acts on even \
                 inside quotes, and {} is a batch file run through cmd.exe: leave them out, \
                 or run the program the batch file starts directly",
                i + 1,
                args[i],
                program.display()
            ),
        )),
    }
}

/// Make `command` start the run's child suspended (resumed once it is in
/// its job) and in a process group of its own.
pub fn prepare(command: &mut tokio::process::Command, _marker: &str) {
    command.creation_flags(CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP);
}

impl Tree {
    /// Put `child` (started suspended, [`prepare`]) in a job of its own,
    /// then let it run. A child that cannot be put in a job is killed.
    pub fn adopt(child: &tokio::process::Child, _marker: &str) -> std::io::Result<Tree> {
        let job = new_job()?;
        let (Some(process), Some(pid)) = (child.raw_handle(), child.id()) else {
            return Err(std::io::Error::other("the child is gone"));
        };
        // SAFETY: both handles are valid for the duration of the call.
        if unsafe { AssignProcessToJobObject(job.0, process as HANDLE) } == 0 {
            return Err(std::io::Error::last_os_error());
        }
        resume(pid)?;
        Ok(Tree { job })
    }

    /// The tree of process `pid`, already running (a pseudo-terminal's
    /// child, which portable-pty starts): put in a job of its own now.
    /// Whatever it started before that is not in the job.
    pub fn of_pid(pid: i32, _marker: &str) -> std::io::Result<Tree> {
        let job = new_job()?;
        // SAFETY: the process handle is checked and closed.
        unsafe {
            let process = OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, 0, pid as u32);
            if process.is_null() {
                return Err(std::io::Error::last_os_error());
            }
            let assigned = AssignProcessToJobObject(job.0, process);
            CloseHandle(process);
            if assigned == 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(Tree { job })
    }

    /// Whether anything of the tree still runs.
    pub fn has_members(&self) -> bool {
        self.active() > 0
    }

    /// Terminate every process of the job. Blocking only briefly.
    pub fn kill(&self) -> KillReport {
        let killed = self.active() as usize;
        // SAFETY: the handle is ours.
        unsafe { TerminateJobObject(self.job.0, 1) };
        KillReport {
            killed,
            forced: killed,
        }
    }

    /// [`Tree::kill`]; terminating a job does not wait, so no thread is
    /// needed.
    pub fn kill_in_background(&self) {
        self.kill();
    }

    /// Nothing to let go of besides the handle, closed on drop.
    pub fn release(&self) {}

    fn active(&self) -> u32 {
        // SAFETY: a zeroed plain struct is valid; the size passed is its own.
        unsafe {
            let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = std::mem::zeroed();
            let ok = QueryInformationJobObject(
                self.job.0,
                JobObjectBasicAccountingInformation,
                (&raw mut info).cast(),
                size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                std::ptr::null_mut(),
            );
            if ok == 0 { 0 } else { info.ActiveProcesses }
        }
    }
}

/// A job that kills its processes when its last handle closes.
fn new_job() -> std::io::Result<Job> {
    // SAFETY: no attributes, no name; the returned handle is checked.
    let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if handle.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    let job = Job(handle);
    // SAFETY: a zeroed plain struct is valid; the size passed is its own.
    unsafe {
        let mut limits: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = std::mem::zeroed();
        limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        if SetInformationJobObject(
            job.0,
            JobObjectExtendedLimitInformation,
            (&raw const limits).cast(),
            size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        ) == 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(job)
}

/// Resume every thread of process `pid` (a suspended child has one).
fn resume(pid: u32) -> std::io::Result<()> {
    // SAFETY: the snapshot and thread handles are checked and closed; the
    // entry's size field is set before use.
    unsafe {
        let snapshot = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
        if snapshot == INVALID_HANDLE_VALUE {
            return Err(std::io::Error::last_os_error());
        }
        let mut entry: THREADENTRY32 = std::mem::zeroed();
        entry.dwSize = size_of::<THREADENTRY32>() as u32;
        let mut resumed = 0;
        let mut more = Thread32First(snapshot, &mut entry) != 0;
        while more {
            if entry.th32OwnerProcessID == pid {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID);
                if !thread.is_null() {
                    ResumeThread(thread);
                    CloseHandle(thread);
                    resumed += 1;
                }
            }
            more = Thread32Next(snapshot, &mut entry) != 0;
        }
        CloseHandle(snapshot);
        if resumed == 0 {
            return Err(std::io::Error::other(format!(
                "no thread of process {pid} could be resumed"
            )));
        }
    }
    Ok(())
}

/// Windows has no signals: a process ends with an exit code.
pub fn signal(_status: &ExitStatus) -> Option<i32> {
    None
}

/// When process `pid` started (its creation time), to tell it from a later
/// process given the same pid.
pub fn start_time(pid: i32) -> Option<u64> {
    // SAFETY: the handle is checked and closed; the times are plain out
    // parameters.
    unsafe {
        let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid as u32);
        if process.is_null() {
            return None;
        }
        let (mut created, mut exited, mut kernel, mut user) = std::mem::zeroed();
        let ok = GetProcessTimes(process, &mut created, &mut exited, &mut kernel, &mut user);
        CloseHandle(process);
        (ok != 0)
            .then(|| (u64::from(created.dwHighDateTime) << 32) | u64::from(created.dwLowDateTime))
    }
}
