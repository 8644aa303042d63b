-- busconsole's two PostgreSQL roles: one owns the schema and runs the migrations, the other is what the
-- console's processes log in as, with only what they use. Run once, as a superuser, with psql:
--
--   psql -v ON_ERROR_STOP=1 -v db=busconsole -v owner_password='...' -v app_password='...' \
--        -h DB_HOST -U postgres -d postgres -f deploy/postgres/roles.sql
--
-- then `manage.py migrate` with DATABASE_URL=postgres://busconsole_owner:...@DB_HOST/busconsole (the
-- migrate step of a deployment) and every process (web, workers, beat) with
-- DATABASE_URL=postgres://busconsole_app:...@DB_HOST/busconsole.
-- tests/deploy/test_postgres.py runs this file on a private PostgreSQL and the console as busconsole_app.

\if :{?db}
\else
\set db busconsole
\endif

CREATE ROLE busconsole_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE busconsole_app LOGIN PASSWORD :'app_password';
CREATE DATABASE :"db" OWNER busconsole_owner ENCODING 'UTF8';

-- Nobody else may connect or create temporary tables; the runtime role may do both. The metric snapshot
-- loads each tick into a temporary table (binary COPY, streams_app/metrics/bulk.py): without TEMPORARY
-- every snapshot fails with "permission denied to create temporary tables".
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE :"db" TO busconsole_app;

\connect :db
-- The schema belongs to the owner: only it creates, alters and drops tables (the migrations).
ALTER SCHEMA public OWNER TO busconsole_owner;
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO busconsole_app;

-- Rows only, on every table the owner's migrations create, now and in later releases.
ALTER DEFAULT PRIVILEGES FOR ROLE busconsole_owner IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO busconsole_app;
ALTER DEFAULT PRIVILEGES FOR ROLE busconsole_owner IN SCHEMA public
    GRANT USAGE ON SEQUENCES TO busconsole_app;

-- A database that already has busconsole's tables (moved to these roles): first make the owner own them,
-- as a superuser in that database: REASSIGN OWNED BY <the old role> TO busconsole_owner; then:
--   GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO busconsole_app;
--   GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO busconsole_app;
