/* The store's SQL (store_sql.h): the schema of version 1, the migrations to each later
 * version, and every statement the store prepares, as text. Values are bound (?N), never
 * spliced. */
#include "store_sql.h"

const char STORE_SQL_SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS jobs("
    " id TEXT PRIMARY KEY, token_hash BLOB NOT NULL, spec TEXT NOT NULL,"
    " config_key TEXT NOT NULL, phase TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '',"
    " sweep_index INTEGER NOT NULL DEFAULT 0, round INTEGER NOT NULL DEFAULT 0,"
    " planning_s REAL NOT NULL DEFAULT 0, created_unix INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS ranks("
    " job_id TEXT NOT NULL REFERENCES jobs(id), rank INTEGER NOT NULL, dp INTEGER NOT NULL,"
    " pp INTEGER NOT NULL, tp INTEGER NOT NULL, gpu TEXT NOT NULL,"
    " PRIMARY KEY(job_id, rank));"
    "CREATE TABLE IF NOT EXISTS measurements("
    " id INTEGER PRIMARY KEY, job_id TEXT NOT NULL REFERENCES jobs(id), rank INTEGER NOT NULL,"
    " phase TEXT NOT NULL, round INTEGER NOT NULL, iteration INTEGER NOT NULL,"
    " clock_mhz INTEGER NOT NULL, time_s REAL NOT NULL, energy_j REAL NOT NULL,"
    " used INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS measurements_job ON measurements(job_id, round, rank);"
    "CREATE TABLE IF NOT EXISTS windows("
    " job_id TEXT NOT NULL, measurement_id INTEGER NOT NULL REFERENCES measurements(id),"
    " stage INTEGER NOT NULL, instr INTEGER NOT NULL, microbatch INTEGER NOT NULL,"
    " clock_mhz INTEGER NOT NULL, time_s REAL NOT NULL, energy_j REAL NOT NULL,"
    " used INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS windows_job ON windows(job_id, used);"
    "CREATE TABLE IF NOT EXISTS profiles("
    " job_id TEXT PRIMARY KEY REFERENCES jobs(id), source TEXT NOT NULL, csv BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS frontiers("
    " job_id TEXT PRIMARY KEY REFERENCES jobs(id), config_key TEXT NOT NULL,"
    " plans BLOB NOT NULL, planning_s REAL NOT NULL);"
    "CREATE INDEX IF NOT EXISTS frontiers_key ON frontiers(config_key);"
    "CREATE TABLE IF NOT EXISTS pipelines("
    " job_id TEXT NOT NULL REFERENCES jobs(id), dp INTEGER NOT NULL,"
    " straggler INTEGER NOT NULL, straggler_time_s REAL NOT NULL, plan_id INTEGER NOT NULL,"
    " PRIMARY KEY(job_id, dp));";

/* MIGRATE[v] brings a version-v database to version v + 1. */
const char *const STORE_SQL_MIGRATE[STORE_SCHEMA_VERSION] = {
    [1] = "ALTER TABLE measurements ADD COLUMN pace_s REAL;"
          "ALTER TABLE measurements ADD COLUMN plan_id INTEGER;"
          "ALTER TABLE measurements ADD COLUMN blocking_power_w REAL;"
          "ALTER TABLE pipelines ADD COLUMN prev_plan_id INTEGER NOT NULL DEFAULT -1;"
          "ALTER TABLE pipelines ADD COLUMN from_iteration INTEGER NOT NULL DEFAULT 0;"
          "ALTER TABLE jobs ADD COLUMN bp_measured_w REAL;"
          "ALTER TABLE jobs ADD COLUMN bp_used_w REAL;",
    [2] = "ALTER TABLE jobs ADD COLUMN finished_unix INTEGER;",
    [3] = "ALTER TABLE pipelines ADD COLUMN pace_hz REAL NOT NULL DEFAULT 0;",
    [4] = "ALTER TABLE pipelines ADD COLUMN newest INTEGER;"
          "ALTER TABLE pipelines ADD COLUMN reports INTEGER NOT NULL DEFAULT 0;"
          "ALTER TABLE pipelines ADD COLUMN report_time_s REAL NOT NULL DEFAULT 0;"
          "ALTER TABLE pipelines ADD COLUMN report_energy_j REAL NOT NULL DEFAULT 0;",
    [5] = "ALTER TABLE pipelines ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;"
          "CREATE TABLE IF NOT EXISTS rules("
          " job_id TEXT NOT NULL REFERENCES jobs(id), epoch INTEGER NOT NULL,"
          " tprime REAL NOT NULL, slow INTEGER NOT NULL, cap INTEGER NOT NULL,"
          " PRIMARY KEY(job_id, epoch));",
    [6] = "CREATE TABLE IF NOT EXISTS clock_precision("
          " job_id TEXT NOT NULL REFERENCES jobs(id), sweep_index INTEGER NOT NULL,"
          " se_pct REAL NOT NULL, iterations INTEGER NOT NULL,"
          " PRIMARY KEY(job_id, sweep_index));",
    /* Deleting a measurement makes SQLite look for windows that still point at it (the foreign
     * key): without this index, a scan of every window of every job per measurement. */
    [7] = "CREATE INDEX IF NOT EXISTS windows_measurement ON windows(measurement_id);",
    [8] = "CREATE TABLE IF NOT EXISTS clusters("
          " id TEXT PRIMARY KEY, token_hash BLOB NOT NULL, created_unix INTEGER NOT NULL,"
          " spec TEXT NOT NULL, profile BLOB, load TEXT, load_unix INTEGER NOT NULL DEFAULT 0,"
          " loads INTEGER NOT NULL DEFAULT 0);",
};

const char *const STORE_SQL[Q_COUNT] = {
    [Q_BEGIN] = "BEGIN IMMEDIATE",
    [Q_COMMIT] = "COMMIT",
    [Q_ROLLBACK] = "ROLLBACK",
    [Q_INS_JOB] = "INSERT INTO jobs(id, token_hash, spec, config_key, phase, reason, sweep_index,"
                  " round, planning_s, created_unix, bp_measured_w, bp_used_w, finished_unix)"
                  " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
    [Q_SET_SPEC] = "UPDATE jobs SET spec=?2 WHERE id=?1",
    [Q_UPD_JOB] = "UPDATE jobs SET phase=?2, reason=?3, sweep_index=?4, round=?5, planning_s=?6,"
                  " bp_measured_w=?7, bp_used_w=?8, finished_unix=?9 WHERE id=?1",
    [Q_ALL_JOBS] = "SELECT id, token_hash, spec, config_key, phase, reason, sweep_index, round,"
                   " planning_s, created_unix, bp_measured_w, bp_used_w, finished_unix FROM jobs"
                   " WHERE phase<>'" STORE_PHASE_DELETING "' ORDER BY created_unix, rowid",
    [Q_JOB_BP] = "SELECT bp_measured_w, bp_used_w FROM jobs WHERE id=?1",
    [Q_INS_RANK] = "INSERT INTO ranks(job_id, rank, dp, pp, tp, gpu) VALUES(?1,?2,?3,?4,?5,?6)",
    [Q_RANKS] = "SELECT rank, dp, pp, tp FROM ranks WHERE job_id=?1",
    [Q_INS_MEAS] = "INSERT INTO measurements(job_id, rank, phase, round, iteration, clock_mhz,"
                   " time_s, energy_j, used, pace_s, plan_id, blocking_power_w)"
                   " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)",
    [Q_INS_WIN] = "INSERT INTO windows(job_id, measurement_id, stage, instr, microbatch,"
                  " clock_mhz, time_s, energy_j, used) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)",
    [Q_COUNT_MEAS] = "SELECT count(*) FROM measurements WHERE job_id=?1",
    [Q_BP] = "SELECT blocking_power_w FROM measurements WHERE job_id=?1 AND used=1"
             " AND blocking_power_w IS NOT NULL ORDER BY blocking_power_w",
    [Q_LATEST] = "SELECT rank, iteration FROM measurements WHERE id IN"
                 " (SELECT max(id) FROM measurements WHERE job_id=?1 GROUP BY rank)",
    [Q_ROUND_COUNTS] = "SELECT rank, count(*) FROM measurements WHERE job_id=?1 AND round=?2"
                       " AND phase='profiling' GROUP BY rank",
    [Q_MEANS] = "SELECT stage, instr, clock_mhz, avg(time_s), avg(energy_j), count(*) FROM windows"
                " WHERE job_id=?1 AND used=1 GROUP BY stage, instr, clock_mhz"
                " ORDER BY stage, clock_mhz DESC, instr",
    [Q_SPREAD] = "SELECT count(*), avg(time_s), avg(time_s*time_s), avg(energy_j),"
                 " avg(energy_j*energy_j) FROM windows"
                 " WHERE job_id=?1 AND used=1 AND clock_mhz=?2 GROUP BY stage, instr",
    [Q_PUT_PROFILE] = "INSERT OR REPLACE INTO profiles(job_id, source, csv) VALUES(?1,?2,?3)",
    [Q_GET_PROFILE] = "SELECT source, csv FROM profiles WHERE job_id=?1",
    [Q_PUT_FRONTIER] = "INSERT OR REPLACE INTO frontiers(job_id, config_key, plans, planning_s)"
                       " VALUES(?1,?2,?3,?4)",
    [Q_GET_FRONTIER] = "SELECT plans FROM frontiers WHERE job_id=?1",
    [Q_FIND_FRONTIER] = "SELECT f.job_id FROM frontiers f JOIN jobs j ON j.id=f.job_id"
                        " WHERE f.config_key=?1 AND f.config_key<>''"
                        " AND j.phase IN ('running','done')"
                        /* it ran: planned early and completed before its ranks were in, it
                         * never served a plan (its pipelines are stored when it runs) */
                        " AND EXISTS (SELECT 1 FROM pipelines p WHERE p.job_id=f.job_id)"
                        " ORDER BY j.created_unix DESC, j.rowid DESC LIMIT 1",
    [Q_PUT_PIPE] =
        "INSERT OR REPLACE INTO pipelines(job_id, dp, straggler, straggler_time_s,"
        " plan_id, prev_plan_id, from_iteration, pace_hz, newest, reports, report_time_s,"
        " report_energy_j, epoch) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)",
    [Q_PIPES] = "SELECT dp, straggler, straggler_time_s, plan_id, prev_plan_id, from_iteration,"
                " pace_hz, newest, reports, report_time_s, report_energy_j, epoch FROM pipelines"
                " WHERE job_id=?1",
    [Q_PUT_RULE] = "INSERT OR REPLACE INTO rules(job_id, epoch, tprime, slow, cap)"
                   " VALUES(?1,?2,?3,?4,?5)",
    [Q_RULES] = "SELECT epoch, tprime, slow, cap FROM rules WHERE job_id=?1 ORDER BY epoch",
    [Q_DEL_RULES_UPTO] = "DELETE FROM rules WHERE job_id=?1 AND epoch<=?2",
    [Q_DEL_RULES] = "DELETE FROM rules WHERE job_id=?1",
    [Q_PUT_PRECISION] = "INSERT OR REPLACE INTO clock_precision(job_id, sweep_index, se_pct,"
                        " iterations) VALUES(?1,?2,?3,?4)",
    [Q_PRECISIONS] = "SELECT sweep_index, se_pct, iterations FROM clock_precision WHERE job_id=?1",
    [Q_DEL_PRECISIONS] = "DELETE FROM clock_precision WHERE job_id=?1",
    /* Children first: the foreign keys point at jobs and measurements. */
    [Q_DEL_WINDOWS] = "DELETE FROM windows WHERE job_id=?1",
    [Q_DEL_MEAS] = "DELETE FROM measurements WHERE job_id=?1",
    [Q_DEL_RANKS] = "DELETE FROM ranks WHERE job_id=?1",
    [Q_DEL_PROFILE] = "DELETE FROM profiles WHERE job_id=?1",
    [Q_DEL_FRONTIER] = "DELETE FROM frontiers WHERE job_id=?1",
    [Q_DEL_PIPES] = "DELETE FROM pipelines WHERE job_id=?1",
    [Q_DEL_JOB] = "DELETE FROM jobs WHERE id=?1",
    [Q_MARK_DELETING] = "UPDATE jobs SET phase='" STORE_PHASE_DELETING "' WHERE id=?1",
    [Q_NEXT_DELETING] = "SELECT id FROM jobs WHERE phase='" STORE_PHASE_DELETING "' LIMIT 1",
    [Q_PURGE_WINDOWS] = "DELETE FROM windows WHERE rowid IN"
                        " (SELECT rowid FROM windows WHERE job_id=?1 LIMIT ?2)",
    [Q_INS_CLUSTER] = "INSERT INTO clusters(id, token_hash, created_unix, spec, profile)"
                      " VALUES(?1,?2,?3,?4,?5)",
    [Q_SET_CLUSTER_PROFILE] = "UPDATE clusters SET profile=?2 WHERE id=?1",
    [Q_SET_CLUSTER_LOAD] = "UPDATE clusters SET load=?2, load_unix=?3, loads=?4 WHERE id=?1",
    [Q_DEL_CLUSTER] = "DELETE FROM clusters WHERE id=?1",
    [Q_ALL_CLUSTERS] = "SELECT id, token_hash, created_unix, spec, profile, load, load_unix, loads"
                       " FROM clusters",
    [Q_PURGE_MEAS] = "DELETE FROM measurements WHERE id IN"
                     " (SELECT id FROM measurements WHERE job_id=?1 LIMIT ?2)",
};
